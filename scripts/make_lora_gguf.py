#!/usr/bin/env python3
"""Writes a seeded random LoRA adapter for a base GGUF in llama.cpp's adapter format (what
convert_lora_to_gguf.py writes: general.type = adapter, adapter.type = lora, adapter.lora.alpha,
`<base tensor>.lora_a` of ggml shape [n_in, rank] and `.lora_b` of [rank, n_out]), with the `gguf`
Python package. The adapters of tessera's LoRA tests, goldens and benchmarks.

A ~ N(0, 1/n_in) as PEFT's kaiming start gives about; B ~ N(0, b_std^2) stands in for training (PEFT
starts B at 0). The delta each target adds is (alpha / rank) * B A x.

  python3 scripts/make_lora_gguf.py --base models/SmolLM2-135M-Instruct.Q4_1.gguf --out /tmp/a.gguf \
      --rank 8 --alpha 16 --targets attn_q,attn_v --seed 1
"""
import argparse
import sys

import numpy as np
import gguf

TARGETS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the base model GGUF")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16.0)
    ap.add_argument("--targets", default="attn_q,attn_v", help="comma-separated, or 'all': " + ",".join(TARGETS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--b-std", type=float, default=0.02)
    ap.add_argument("--type", choices=["f32", "f16"], default="f32")
    args = ap.parse_args()
    targets = TARGETS if args.targets == "all" else args.targets.split(",")
    for t in targets:
        if t not in TARGETS:
            print(f"unknown target {t}; one of {TARGETS}", file=sys.stderr)
            return 2
    base = gguf.GGUFReader(args.base)
    arch = bytes(base.fields["general.architecture"].parts[-1]).decode()
    shapes = {t.name: [int(d) for d in t.shape] for t in base.tensors}  # ggml order: [n_in, n_out]
    rng = np.random.default_rng(args.seed)
    dtype = np.float32 if args.type == "f32" else np.float16
    w = gguf.GGUFWriter(args.out, arch)
    w.add_type("adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", args.alpha)
    w.add_name(f"random lora r{args.rank} seed {args.seed}")
    layers = sorted({int(n.split(".")[1]) for n in shapes if n.startswith("blk.")})
    for layer in layers:
        for t in targets:
            name = f"blk.{layer}.{t}.weight"
            n_in, n_out = shapes[name]
            a = rng.normal(0.0, 1.0 / np.sqrt(n_in), size=(args.rank, n_in)).astype(dtype)  # [rank][n_in]
            b = rng.normal(0.0, args.b_std, size=(n_out, args.rank)).astype(dtype)          # [n_out][rank]
            w.add_tensor(name + ".lora_a", a)
            w.add_tensor(name + ".lora_b", b)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
