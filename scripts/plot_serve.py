#!/usr/bin/env python3
"""Plots `tessera bench serve --json-out` results: throughput and latency across request rates.

usage: plot_serve.py RESULTS.json [MORE.json ...] OUT.png

Each JSON file is one server (its config.label, else its base_url, names it in the legend), so
tessera and a peer measured with the same workload can share one figure. Four panels, x = request
rate (req/s, log scale; "inf" = all at once, drawn one step right of the highest finite rate):
output throughput (tok/s) and, for each of TTFT, TPOT and E2E latency, the median (solid) and p90
(dotted) in ms on a log scale.
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

PLAIN = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")  # 20,000 rather than 2x10^4
# Minor ticks of a log axis: label only 2x and 5x a power of ten, so two decades stay legible.
PLAIN_2_5 = FuncFormatter(lambda v, _: PLAIN(v) if f"{v:e}"[0] in "25" else "")


def load(path):
    with open(path) as f:
        data = json.load(f)
    cfg = data.get("config", {})
    label = cfg.get("label") or cfg.get("base_url") or os.path.basename(path)
    return label, cfg, data["results"]


def rate_axis(series):
    """x positions for every rate seen: finite rates as they are, inf at 2x the largest."""
    finite = sorted({r["request_rate"] for _, _, res in series for r in res if r["request_rate"] != "inf"})
    inf_x = finite[-1] * 2 if finite else 1.0
    ticks = finite + ([inf_x] if any(r["request_rate"] == "inf" for _, _, res in series for r in res) else [])
    labels = [f"{x:g}" for x in finite] + (["inf"] if len(ticks) > len(finite) else [])
    return (lambda rate: inf_x if rate == "inf" else rate), ticks, labels


def main():
    if len(sys.argv) < 3 or not sys.argv[-1].endswith(".png"):
        sys.exit(__doc__)
    series = [load(p) for p in sys.argv[1:-1]]
    x_of, ticks, tick_labels = rate_axis(series)
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    panels = [(axes[0][0], None, "output throughput", "output tokens / s"),
              (axes[0][1], "ttft_ms", "time to first token (TTFT)", "ms (log)"),
              (axes[1][0], "tpot_ms", "time per output token (TPOT)", "ms (log)"),
              (axes[1][1], "e2el_ms", "end-to-end latency", "ms (log)")]
    for i, (label, _, results) in enumerate(series):
        results = sorted(results, key=lambda r: x_of(r["request_rate"]))
        xs = [x_of(r["request_rate"]) for r in results]
        color = colors[i % len(colors)]
        for ax, metric, _, _ in panels:
            if metric is None:
                ax.plot(xs, [r["output_throughput"] for r in results], "o-", color=color, label=label)
                continue
            ax.plot(xs, [r[metric]["median"] for r in results], "o-", color=color, label=f"{label} p50")
            ax.plot(xs, [r[metric]["p90"] for r in results], "s:", color=color, label=f"{label} p90")
    for ax, metric, title, ylabel in panels:
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks)
        ax.set_xticklabels(tick_labels)
        ax.minorticks_off()
        ax.set_xlabel("request rate (req/s, Poisson; inf = all at once)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        if metric is not None:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(PLAIN)
            ax.yaxis.set_minor_formatter(PLAIN_2_5)
            ax.tick_params(axis="y", which="minor", labelsize=7)
        else:
            ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    _, cfg, results = series[0]
    in_range = f" +-{cfg['input_len_range']:.0%}" if cfg.get("input_len_range") else ""
    out_range = f" +-{cfg['output_len_range']:.0%}" if cfg.get("output_len_range") else ""
    fig.suptitle(f"{os.path.basename(str(cfg.get('model', '')))}: input {cfg.get('input_len')}{in_range} "
                 f"words, output {cfg.get('output_len')}{out_range} tokens, "
                 f"{cfg.get('num_prompts')} requests per rate, max concurrency "
                 f"{cfg.get('max_concurrency') or 'unlimited'}")
    fig.tight_layout()
    fig.savefig(sys.argv[-1], dpi=110)
    print(f"plot: {sys.argv[-1]}")
    return 0 if all(not math.isnan(x) for x in ticks) else 1


if __name__ == "__main__":
    sys.exit(main())
