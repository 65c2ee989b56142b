#!/usr/bin/env python3
"""Regenerates tests/data/hf_tiny/: for each family tessera implements beyond llama/qwen2, a tiny
random-weight model built with Hugging Face `transformers` (CPU, float32) from a small config,
converted to GGUF (F32) with the `gguf` package, and transformers' logits at every position of a
64-token teacher-forced sequence (<name>.logits.json). tests/model/test_hf_tiny.cpp loads the
GGUFs (and a Q8_0 copy it quantizes itself) and compares. Offline; not run in CI:

    pip install torch transformers gguf numpy && python3 scripts/gen_hf_tiny_goldens.py

Families: gemma3 (window 16 < 64 tokens, pattern 3, linear rope scaling on the global layers,
query_pre_attn_scalar != head_dim), qwen3 (QK-norm), llama with Llama-3.1 rope scaling
(rope_freqs from transformers' own llama3 frequencies), phi3 (fused qkv / gate-up, window 24).
"""
import json
import os

import gguf
import numpy as np
import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "hf_tiny")
SEQ = 64
VOCAB = 256


def tokens():
    rng = np.random.default_rng(1234)
    return [int(t) for t in rng.integers(3, VOCAB, size=SEQ)]


def common(cfg_cls, **kw):
    base = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                rms_norm_eps=1e-6, tie_word_embeddings=False)
    base.update(kw)
    return cfg_cls(**base)


def llama_permute(w, n_head):
    # HF keeps q/k rows in the rotate-half (neox) order; GGUF's llama arch pairs (2i, 2i+1).
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path, arch, cfg, sd, extra_kv, rename, norm_plus_one=False):
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"hf-tiny-{arch}")
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    rp = cfg.rope_parameters
    w.add_rope_freq_base(float(rp["full_attention"]["rope_theta"] if "full_attention" in rp else rp["rope_theta"]))
    w.add_layer_norm_rms_eps(float(cfg.rms_norm_eps))
    for key, (kind, value) in extra_kv.items():
        getattr(w, f"add_{kind}")(key, value)
    # A minimal tokenizer (tessera needs one to load): byte-like pieces, SPM scores.
    w.add_tokenizer_model("llama")
    w.add_token_list([f"<t{i}>" for i in range(VOCAB)])
    w.add_token_scores([0.0] * VOCAB)
    w.add_token_types([1] * VOCAB)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for name, t in sd.items():
        new = rename(name)
        if new is None:
            continue
        a = t.detach().to(torch.float32).numpy()
        if norm_plus_one and name.endswith("norm.weight"):
            a = a + 1.0  # Gemma's RMSNorm multiplies by (1 + weight); GGUF stores 1 + weight
        if isinstance(new, list):  # (name, array) pairs made by rename
            for n2, a2 in new:
                w.add_tensor(n2, a2.astype(np.float32))
            continue
        w.add_tensor(new, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def layer_rename(name, table):
    parts = name.split(".")
    if parts[:2] == ["model", "layers"]:
        rest = ".".join(parts[3:])
        if rest in table:
            return f"blk.{parts[2]}.{table[rest]}"
        raise KeyError(name)
    return {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
            "lm_head.weight": "output.weight"}.get(name, None if "rotary" in name else KeyError(name))


LLAMA_TABLE = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
}
GEMMA_TABLE = dict(LLAMA_TABLE)
GEMMA_TABLE.update({"post_attention_layernorm.weight": "post_attention_norm.weight",
                    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
                    "post_feedforward_layernorm.weight": "post_ffw_norm.weight"})
PHI3_TABLE = dict(LLAMA_TABLE)
PHI3_TABLE.update({"self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight"})


def build(name):
    torch.manual_seed(7)
    if name == "gemma3":
        cfg = common(transformers.Gemma3TextConfig, head_dim=32, num_hidden_layers=4, sliding_window=16,
                     sliding_window_pattern=3, layer_types=["sliding_attention", "sliding_attention",
                                                            "full_attention", "sliding_attention"],
                     query_pre_attn_scalar=24,
                     rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6},
                                      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                     hidden_activation="gelu_pytorch_tanh",
                     tie_word_embeddings=True, final_logit_softcapping=None, attn_logit_softcapping=None,
                     attn_implementation="eager")
        model = transformers.Gemma3ForCausalLM(cfg)
        kv = {"gemma3.attention.sliding_window": ("uint32", 16),
              "gemma3.attention.sliding_window_pattern": ("uint32", 3),
              "gemma3.attention.query_pre_attn_scalar": ("float32", 24.0),
              "gemma3.rope.scaling.type": ("string", "linear"), "gemma3.rope.scaling.factor": ("float32", 4.0)}
        ren = lambda n: layer_rename(n, GEMMA_TABLE)
        return cfg, model, kv, ren, True
    if name == "qwen3":
        cfg = common(transformers.Qwen3Config, head_dim=32, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                     attn_implementation="eager")
        model = transformers.Qwen3ForCausalLM(cfg)
        return cfg, model, {}, lambda n: layer_rename(n, LLAMA_TABLE), False
    if name == "llama31":
        cfg = common(transformers.LlamaConfig, max_position_embeddings=256,
                     rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 32},
                     attn_implementation="eager")
        model = transformers.LlamaForCausalLM(cfg)
        inv_scaled, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")
        base = torch.tensor(500000.0, dtype=torch.float64)
        inv_plain = 1.0 / base ** (torch.arange(0, 16, 2, dtype=torch.float64) / 16)
        factors = (inv_plain / inv_scaled.to(torch.float64)).to(torch.float32).numpy()
        heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads

        def ren(n):
            new = layer_rename(n, LLAMA_TABLE)
            if new == "token_embd.weight":
                return [("token_embd.weight", model.model.embed_tokens.weight.detach().numpy()),
                        ("rope_freqs.weight", factors)]
            if new and new.endswith("attn_q.weight"):
                return [(new, llama_permute(model.state_dict()[n].numpy(), heads))]
            if new and new.endswith("attn_k.weight"):
                return [(new, llama_permute(model.state_dict()[n].numpy(), kv_heads))]
            return new
        return cfg, model, {}, ren, False
    if name == "phi3":
        cfg = common(transformers.Phi3Config, num_key_value_heads=4, sliding_window=24, pad_token_id=0,
                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
                     attn_implementation="eager")
        model = transformers.Phi3ForCausalLM(cfg)
        kv = {"phi3.attention.sliding_window": ("uint32", 24), "phi3.rope.dimension_count": ("uint32", 16)}
        return cfg, model, kv, lambda n: layer_rename(n, PHI3_TABLE), False
    raise ValueError(name)


def main():
    os.makedirs(OUT, exist_ok=True)
    ids = tokens()
    for name in ["gemma3", "qwen3", "llama31", "phi3"]:
        cfg, model, kv, ren, plus_one = build(name)
        model.eval()
        with torch.no_grad():  # bigger weights than the init's 0.02 std: logits of a few units
            for p in model.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.15)
                elif plus_one:
                    p.normal_(0.0, 0.1)   # Gemma norms: (1 + w)
                else:
                    p.normal_(1.0, 0.1)
            logits = model(torch.tensor([ids])).logits[0].to(torch.float32).numpy()
        arch = {"llama31": "llama"}.get(name, name)
        write_gguf(os.path.join(OUT, f"{name}.f32.gguf"), arch, cfg, model.state_dict(), kv, ren, plus_one)
        with open(os.path.join(OUT, f"{name}.logits.json"), "w") as f:
            json.dump({"what": f"transformers {transformers.__version__} float32 logits of a random tiny {name}, "
                               "teacher-forced, every position", "tokens": ids,
                       "logits": [[round(float(x), 6) for x in row] for row in logits]}, f)
        print(name, "logits range", float(logits.min()), float(logits.max()))


if __name__ == "__main__":
    main()
