#!/usr/bin/env python3
"""Structured outputs under load: 16 concurrent chat requests to a running `tessera serve`,
constrained by a mid-size JSON schema (the suite's "order") vs unconstrained, interleaved rounds
in one run. Reports aggregate generated tokens/s per round and the ratio constrained /
unconstrained (min-max over rounds). Lengths: both sides generate up to --max-tokens; a grammar
that completes stops its request early, so throughput is per generated token.
    bench_grammar_serving.py --base http://127.0.0.1:8000/v1 --model NAME [--rounds 3]"""
import argparse, concurrent.futures, json, os, time
import openai

ap = argparse.ArgumentParser()
ap.add_argument("--base", default="http://127.0.0.1:8000/v1")
ap.add_argument("--model", required=True)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--concurrency", type=int, default=16)
ap.add_argument("--max-tokens", type=int, default=96)
args = ap.parse_args()
here = os.path.dirname(os.path.abspath(__file__))
schema = next(s["schema"] for s in json.load(open(os.path.join(here, "..", "tests/data/grammar/schemas.json")))
              if s["name"] == "order")
client = openai.OpenAI(base_url=args.base, api_key="x", timeout=600)


def one(i, constrained):
    kw = {"response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": schema}}} if constrained else {}
    r = client.chat.completions.create(model=args.model, max_tokens=args.max_tokens, temperature=1.0, seed=i,
                                       messages=[{"role": "user", "content": f"Write order number {i} as JSON."}], **kw)
    return r.usage.completion_tokens


def round_tps(constrained):
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        tokens = sum(pool.map(lambda i: one(i, constrained), range(args.concurrency)))
    return tokens / (time.time() - t0), tokens


ratios = []
for r in range(args.rounds):
    u, ut = round_tps(False)
    c, ct = round_tps(True)
    ratios.append(c / u)
    print(f"round {r}: unconstrained {u:.1f} tok/s ({ut} tokens), constrained {c:.1f} tok/s ({ct} tokens), ratio {c / u:.3f}")
print(f"ratio constrained/unconstrained: min {min(ratios):.3f} max {max(ratios):.3f} over {len(ratios)} rounds")
