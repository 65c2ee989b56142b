#!/usr/bin/env python3
"""Plots `tessera bench sweep` results: output throughput vs time per output token across
max_num_seqs (the throughput-versus-latency curve). Called by the CLI as
    python3 scripts/plot_sweep.py RESULTS.json OUT.png
RESULTS.json: a list of {max_num_seqs, output_tok_s, tpot_p50_ms, ttft_p50_ms, occupancy}.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_sweep.py RESULTS.json OUT.png")
    rows = sorted(json.load(open(sys.argv[1])), key=lambda r: r["max_num_seqs"])
    if not rows:
        sys.exit("no results in " + sys.argv[1])
    tpot = [r["tpot_p50_ms"] for r in rows]
    tps = [r["output_tok_s"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.5))
    a.plot(tpot, tps, "o-")
    for r in rows:
        a.annotate(f"B={r['max_num_seqs']}", (r["tpot_p50_ms"], r["output_tok_s"]),
                   textcoords="offset points", xytext=(5, -10), fontsize=8)
    a.set_xlabel("TPOT p50 (ms / output token, per user)")
    a.set_ylabel("output tokens / s (all users)")
    a.set_title("throughput vs latency across max_num_seqs")
    a.grid(alpha=0.3)
    seqs = [r["max_num_seqs"] for r in rows]
    b.plot(seqs, [r["ttft_p50_ms"] for r in rows], "s-", label="TTFT p50 (ms)")
    b.set_xscale("log", base=2)
    b.set_yscale("log")
    b.set_xlabel("max_num_seqs")
    b.set_ylabel("ms")
    b2 = b.twinx()
    b2.plot(seqs, [100 * r["occupancy"] for r in rows], "^--", color="gray", label="occupancy (%)")
    b2.set_ylabel("batch occupancy (%)")
    b.set_title("TTFT and occupancy")
    b.legend(loc="upper left")
    b2.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print("wrote", sys.argv[2])


if __name__ == "__main__":
    main()
