#!/usr/bin/env python3
"""Plots `tessera bench serve --json-out` results: throughput and latency across request rates.

usage: plot_serve.py RESULTS.json OUT.png
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        data = json.load(f)
    results = data["results"]
    rates = [r["request_rate"] for r in results]
    finite = [r for r in rates if r != "inf"]
    inf_x = (max(finite) * 2 if finite else 1.0)
    xs = [inf_x if r == "inf" else r for r in rates]
    labels = ["inf" if r == "inf" else f"{r:g}" for r in rates]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.plot(xs, [r["output_throughput"] for r in results], "o-", label="output tok/s")
    ax1.plot(xs, [r["total_token_throughput"] for r in results], "s--", label="total tok/s")
    ax1.set_xlabel("request rate (req/s)")
    ax1.set_ylabel("tokens / s")
    ax1.set_title("throughput")
    ax1.legend()
    for metric, style in (("ttft_ms", "o-"), ("tpot_ms", "s-"), ("e2el_ms", "^-")):
        ax2.plot(xs, [r[metric]["median"] for r in results], style, label=f"{metric[:-3]} median")
        ax2.plot(xs, [r[metric]["p99"] for r in results], style.replace("-", ":"), label=f"{metric[:-3]} p99")
    ax2.set_yscale("log")
    ax2.set_xlabel("request rate (req/s)")
    ax2.set_ylabel("ms")
    ax2.set_title("latency")
    ax2.legend(fontsize=7)
    for ax in (ax1, ax2):
        ax.set_xticks(xs)
        ax.set_xticklabels(labels)
    cfg = data.get("config", {})
    fig.suptitle(f"{cfg.get('model', '')}  in {cfg.get('input_len')} out {cfg.get('output_len')} "
                 f"n {cfg.get('num_prompts')}")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print(f"plot: {sys.argv[2]}")
    return 0 if all(not math.isnan(x) for x in xs) else 1


if __name__ == "__main__":
    main()
