#!/usr/bin/env python3
"""Regenerates tests/data/lora_peft/: the independent reference for LoRA adapters (issue 45 (b)).
For each of a tiny random llama (Llama-3.1 rope scaling), qwen2 (q/k/v biases) and gemma3 (16-token
window), built with Hugging Face `transformers` (CPU, float32) as in gen_hf_tiny_goldens.py, a
random PEFT LoRA (r=8, lora_alpha=16, targets q/k/v/o/gate/up/down; lora_A and lora_B both drawn
from a seeded normal, so B != 0 unlike PEFT's initial state) is attached, and this writes:
  the base model (F32, the gen_hf_tiny_goldens.py converter): for llama and gemma3 the very
                         bytes of tests/data/hf_tiny/{llama31,gemma3}.f32.gguf (checked here, not
                         stored twice), for qwen2 <name>.base.f32.gguf,
  <name>.lora.f32.gguf   the adapter in llama.cpp's LoRA GGUF layout (general.type=adapter,
                         adapter.type=lora, adapter.lora.alpha; per target `<base tensor>.lora_a`
                         of ggml shape [n_in, r] and `.lora_b` of ggml shape [r, n_out], F32),
  <name>.logits.json     peft's float32 logits with the adapter applied at runtime (not merged)
                         and the base model's, at every position of a 32-token teacher-forced
                         sequence.
tests/model/test_lora_peft.cpp loads both GGUFs with tessera and compares. Offline; not run in CI:

    pip install torch transformers peft gguf numpy && python3 scripts/gen_lora_peft_goldens.py
"""
import filecmp
import json
import os
import sys
import tempfile

import numpy as np
import peft
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_hf_tiny_goldens as hf  # noqa: E402  (the tiny models and the HF -> GGUF converter)
import gguf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "lora_peft")
SEQ = 32
RANK, ALPHA = 8, 16.0
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

QWEN2_TABLE = dict(hf.LLAMA_TABLE)
QWEN2_TABLE.update({"self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
                    "self_attn.v_proj.bias": "attn_v.bias"})


def build(name):
    """(cfg, model, extra kv, tensor rename, gemma norm +1, HF -> GGUF layer table, GGUF arch)."""
    if name == "qwen2":
        torch.manual_seed(7)
        cfg = hf.common(transformers.Qwen2Config, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                        attn_implementation="eager")
        model = transformers.Qwen2ForCausalLM(cfg)
        return cfg, model, {}, lambda n: hf.layer_rename(n, QWEN2_TABLE), False, QWEN2_TABLE, "qwen2"
    cfg, model, kv, ren, plus_one = hf.build({"llama": "llama31"}.get(name, name))
    table = hf.GEMMA_TABLE if name == "gemma3" else hf.LLAMA_TABLE
    return cfg, model, kv, ren, plus_one, table, name


def randomize_base(model, plus_one):
    # As gen_hf_tiny_goldens.py: weights bigger than the init's 0.02 std (logits of a few units).
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.15)
            elif plus_one:
                p.normal_(0.0, 0.1)
            else:
                p.normal_(1.0, 0.1)


def write_adapter(path, arch, cfg, peft_model, table):
    """The adapter as llama.cpp reads it. PEFT's lora_A.weight is torch [r, n_in] and lora_B.weight
    [n_out, r]; the gguf package reverses numpy shapes, so they land as ggml [n_in, r] / [r, n_out].
    The llama arch's q/k rows are stored rope-pair interleaved (hf.llama_permute on the base weight):
    B's output rows get the same permutation, A (input side) none."""
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"hf-tiny-{arch}-lora")
    w.add_type(gguf.GGUFType.ADAPTER)
    w.add_string(gguf.Keys.Adapter.TYPE, "lora")
    w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, ALPHA)
    count = 0
    for mod_name, mod in peft_model.named_modules():
        if not isinstance(mod, peft.tuners.lora.LoraLayer):
            continue
        hf_name = mod_name.removeprefix("base_model.model.") + ".weight"
        dest = hf.layer_rename(hf_name, table)
        a = mod.lora_A["default"].weight.detach().to(torch.float32).numpy()
        b = mod.lora_B["default"].weight.detach().to(torch.float32).numpy()
        assert a.shape[0] == RANK and b.shape[1] == RANK, (hf_name, a.shape, b.shape)
        if arch == "llama" and dest.endswith("attn_q.weight"):
            b = hf.llama_permute(b, cfg.num_attention_heads)
        elif arch == "llama" and dest.endswith("attn_k.weight"):
            b = hf.llama_permute(b, cfg.num_key_value_heads)
        w.add_tensor(dest + ".lora_a", np.ascontiguousarray(a))
        w.add_tensor(dest + ".lora_b", np.ascontiguousarray(b))
        count += 1
    assert count == 7 * cfg.num_hidden_layers, count
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    os.makedirs(OUT, exist_ok=True)
    ids = hf.tokens()[:SEQ]
    for name in ["llama", "qwen2", "gemma3"]:
        cfg, model, kv, ren, plus_one, table, arch = build(name)
        model.eval()
        randomize_base(model, plus_one)
        with torch.no_grad():
            base = model(torch.tensor([ids])).logits[0].to(torch.float32).numpy()
        # The base GGUF before peft wraps the modules (the converter reads the plain state dict).
        shared = {"llama": "llama31", "gemma3": "gemma3"}.get(name)
        if shared is None:
            base_rel = f"lora_peft/{name}.base.f32.gguf"
            hf.write_gguf(os.path.join(OUT, f"{name}.base.f32.gguf"), arch, cfg, model.state_dict(), kv, ren, plus_one)
        else:
            base_rel = f"hf_tiny/{shared}.f32.gguf"
            with tempfile.TemporaryDirectory() as tmp:
                mine = os.path.join(tmp, "base.gguf")
                hf.write_gguf(mine, arch, cfg, model.state_dict(), kv, ren, plus_one)
                if not filecmp.cmp(mine, os.path.join(ROOT, "tests", "data", base_rel), shallow=False):
                    sys.exit(f"{name}: the base differs from tests/data/{base_rel}: "
                             "rerun scripts/gen_hf_tiny_goldens.py first (same torch/transformers)")
        config = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TARGETS, lora_dropout=0.0, bias="none")
        pm = peft.get_peft_model(model, config)
        gen = torch.Generator().manual_seed(45)
        with torch.no_grad():
            for mod in pm.modules():
                if isinstance(mod, peft.tuners.lora.LoraLayer):
                    for lin in (mod.lora_A["default"], mod.lora_B["default"]):
                        lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen) * 0.1)
        pm.eval()
        with torch.no_grad():
            lora = pm(torch.tensor([ids])).logits[0].to(torch.float32).numpy()
        write_adapter(os.path.join(OUT, f"{name}.lora.f32.gguf"), arch, cfg, pm, table)
        with open(os.path.join(OUT, f"{name}.logits.json"), "w") as f:
            json.dump({"what": f"transformers {transformers.__version__} + peft {peft.__version__} float32 logits of "
                               f"a random tiny {name} with a random LoRA (r={RANK}, alpha={ALPHA:g}, "
                               "q/k/v/o/gate/up/down, applied at runtime) and of the base, teacher-forced, "
                               "every position",
                       "base_gguf": base_rel, "rank": RANK, "alpha": ALPHA, "tokens": ids,
                       "lora_logits": [[round(float(x), 6) for x in row] for row in lora],
                       "base_logits": [[round(float(x), 6) for x in row] for row in base]}, f)
        print(name, "base logits in", float(base.min()), float(base.max()),
              "max |lora - base|", float(np.abs(lora - base).max()))


if __name__ == "__main__":
    main()
