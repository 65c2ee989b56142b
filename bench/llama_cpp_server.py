#!/usr/bin/env python3
"""llama.cpp's OpenAI-compatible server (llama-cpp-python's `llama_cpp.server`) as B5's peer.

Runs the same FastAPI app as `python3 -m llama_cpp.server`, with two changes this VM needs:
  * every model is loaded with use_extra_bufts = False: llama.cpp's AMX/extra-buffer weight
    repacking segfaults inside llama_decode here (see bench/LOG.md, B4);
  * interrupt_requests = False: by default the app aborts a streaming completion as soon as another
    request arrives, which would turn a load test into a cancellation test;
  * `min_tokens` blocks every end-of-generation token of the vocab, not only EOS: the app's
    MinTokensLogitsProcessor masks llama.token_eos() alone, but llama.cpp also stops on the other EOG
    tokens (SmolLM2: 0 <|endoftext|>, 2 <|im_end|>, 4 <reponame>), so min_tokens = max_tokens (how the
    load generator asks a server without ignore_eos for exactly max_tokens) would not hold.
and settings chosen to match `tessera serve` in bench/bench_serving.py: the same GGUF, 2 threads for
decode and prefill, a 2,048-token context, n_batch 2048 / n_ubatch 512 (llama.cpp's defaults), and
logits_all = False (only the last position's logits, as tessera computes).

What it cannot match: llama-cpp-python's server runs one request at a time on one llama_context
(a lock around the model; no slots, no batching across requests), so there is no n_parallel to set;
concurrent requests queue in the server. It sends no usage in streamed chunks, so the load
generator counts text chunks as output tokens.

  python3 bench/llama_cpp_server.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --port 8001
"""
import argparse
import os
import sys

import llama_cpp.llama_cpp as llama_low


def disable_extra_bufts():
    """Wraps llama_model_default_params so every Llama() the server builds skips AMX repacking."""
    original = llama_low.llama_model_default_params

    def params_without_extra_bufts():
        p = original()
        p.use_extra_bufts = False
        return p

    llama_low.llama_model_default_params = params_without_extra_bufts


def eog_token_ids(model_path):
    """Every token llama.cpp ends generation on, read from the GGUF's vocab (no weights loaded)."""
    import llama_cpp

    vocab_llama = llama_cpp.Llama(model_path, vocab_only=True, verbose=True)
    vocab = vocab_llama._model.vocab
    ids = [t for t in range(llama_low.llama_vocab_n_tokens(vocab)) if llama_low.llama_vocab_is_eog(vocab, t)]
    vocab_llama.close()
    return ids


def min_tokens_blocks_every_eog(eog_ids):
    """Replaces the server's MinTokensLogitsProcessor (looked up on the llama_cpp package per request)."""
    import llama_cpp
    import numpy as np

    class MinTokensAllEog(llama_cpp.MinTokensLogitsProcessor):
        def __call__(self, input_ids, scores):
            if self.prompt_tokens is None:
                self.prompt_tokens = len(input_ids)
            if len(input_ids) - self.prompt_tokens < self.min_tokens:
                scores[eog_ids] = -np.inf
            return scores

    llama_cpp.MinTokensLogitsProcessor = MinTokensAllEog


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--model-alias", default=None, help="name served in /v1/models (default: the path)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8001)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--n-batch", type=int, default=2048)
    ap.add_argument("--n-ubatch", type=int, default=512)
    args = ap.parse_args()
    if not os.path.exists(args.model):
        sys.exit(f"no such model: {args.model}")

    disable_extra_bufts()
    eog_ids = eog_token_ids(args.model)
    print(f"llama_cpp_server: min_tokens masks EOG tokens {eog_ids}", file=sys.stderr)
    min_tokens_blocks_every_eog(eog_ids)
    # Imported after the patch so nothing captures the original function first.
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    server = ServerSettings(host=args.host, port=args.port, interrupt_requests=False)
    # verbose=True: with verbose=False llama-cpp-python redirects the C stderr, which segfaults here.
    model = ModelSettings(model=args.model, model_alias=args.model_alias, n_threads=args.threads,
                          n_threads_batch=args.threads, n_ctx=args.ctx, n_batch=args.n_batch,
                          n_ubatch=args.n_ubatch, logits_all=False, verbose=True)
    app = create_app(server_settings=server, model_settings=[model])
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
