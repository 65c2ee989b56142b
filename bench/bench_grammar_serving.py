#!/usr/bin/env python3
"""Structured outputs under load: 16 concurrent chat requests to `tessera serve`, constrained by a
mid-size JSON schema (the suite's "order") vs unconstrained, interleaved rounds in one run.

Same lengths. A constrained request ends when its grammar is complete (engine_step.cpp: the sample
stops as on a stop string; ignore_eos / min_tokens do not hold it open), so the constrained arm
cannot be stretched to max_tokens. Instead a calibration pass runs the constrained requests once
(also compiling the grammar into the server's cache) and records each request's length L_i; in
every round the unconstrained request i then asks for exactly L_i tokens (max_tokens = min_tokens =
L_i, ignore_eos), with the same prompt and seed. Each round prints both arms' token totals: the
constrained lengths can move a little from the calibration (batch composition changes logits), so
every measure below is per generated token.

Measures per arm (one arm = 16 requests in flight together):
  wall   aggregate generated tokens / wall seconds; ratio constrained / unconstrained.
  CPU    the server process's CPU seconds (utime + stime of /proc/<pid>/stat, all threads) per
         generated token. On a loaded host other processes take turns on the cores, which stretches
         wall time but not the server's own CPU time, so tokens per CPU-second is what a dedicated
         CPU-bound host would deliver; ratio = tokens/CPU-s constrained / unconstrained (1 / the
         grammar's CPU cost per token).
  engine /metrics deltas: engine steps, and mean inter-token latency (wall, per row).
Rounds alternate which arm runs first so that drift in the host's load does not favour one arm;
the summary is median (min-max) over rounds.

    bench_grammar_serving.py [--model-path GGUF] [--threads 2] [--rounds 5]   # starts the server
    bench_grammar_serving.py --base http://127.0.0.1:8000/v1 --pid PID --model NAME  # a running one
"""
import argparse, concurrent.futures, json, os, re, statistics, subprocess, time, urllib.request
import openai

HERE = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--base", default="", help="a running server's /v1 URL (else the script starts one)")
ap.add_argument("--pid", type=int, default=0, help="that server's pid (for its CPU time)")
ap.add_argument("--model", default="bench", help="served model name")
ap.add_argument("--tessera", default=os.path.join(HERE, "..", "build/release/src/cli/tessera"))
ap.add_argument("--model-path", default="", help="GGUF for the started server (default: SmolLM2)")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--port", type=int, default=18417)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--concurrency", type=int, default=16)
ap.add_argument("--max-tokens", type=int, default=96)
args = ap.parse_args()
schema = next(s["schema"] for s in json.load(open(os.path.join(HERE, "..", "tests/data/grammar/schemas.json")))
              if s["name"] == "order")

server = None
if not args.base:
    cmd = [args.tessera, "serve", "--port", str(args.port), "--threads", str(args.threads),
           "--served-model-name", args.model] + (["--model", args.model_path] if args.model_path else [])
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    args.base, args.pid = f"http://127.0.0.1:{args.port}/v1", server.pid
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{args.port}/health", timeout=5)
            break
        except OSError:
            if server.poll() is not None:
                raise SystemExit(f"server exited: {' '.join(cmd)}")
            time.sleep(0.5)
root = args.base.rsplit("/v1", 1)[0]
client = openai.OpenAI(base_url=args.base, api_key="x", timeout=600)
ticks = os.sysconf("SC_CLK_TCK")


def cpu_seconds():
    if not args.pid:
        return float("nan")
    fields = open(f"/proc/{args.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14, 15 of stat(5))


def metrics():
    text = urllib.request.urlopen(f"{root}/metrics", timeout=30).read().decode()
    out = {}
    for name in ("tessera:engine_steps_total", "tessera:inter_token_latency_seconds_sum",
                 "tessera:inter_token_latency_seconds_count"):
        m = re.search(r"^" + re.escape(name) + r"(\{[^}]*\})? (\S+)$", text, re.M)
        out[name] = float(m.group(2)) if m else float("nan")
    return out


def one(i, constrained, lengths):
    if constrained:
        kw = {"max_tokens": args.max_tokens,
              "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": schema}}}
    else:
        kw = {"max_tokens": lengths[i], "extra_body": {"min_tokens": lengths[i], "ignore_eos": True}}
    r = client.chat.completions.create(model=args.model, temperature=1.0, seed=i,
                                       messages=[{"role": "user", "content": f"Write order number {i} as JSON."}], **kw)
    return r.usage.completion_tokens


def arm(constrained, lengths):
    m0, c0, t0 = metrics(), cpu_seconds(), time.time()
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        per = list(pool.map(lambda i: one(i, constrained, lengths), range(args.concurrency)))
    wall, cpu, m1 = time.time() - t0, cpu_seconds() - c0, metrics()
    tok = sum(per)
    d = {k: m1[k] - m0[k] for k in m0}
    itl = d["tessera:inter_token_latency_seconds_sum"] / max(d["tessera:inter_token_latency_seconds_count"], 1)
    return {"per": per, "tokens": tok, "tps": tok / wall, "cpu_ms_tok": 1e3 * cpu / tok,
            "steps": d["tessera:engine_steps_total"], "itl_ms": 1e3 * itl}


def fmt(a):
    return (f"{a['tokens']} tok, {a['tps']:.1f} tok/s, {a['cpu_ms_tok']:.2f} CPU-ms/tok, "
            f"{a['steps']:.0f} steps, ITL {a['itl_ms']:.1f} ms")


def med(xs):
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


try:
    calib = arm(True, None)
    lengths = calib["per"]
    print(f"calibration (constrained): lengths {lengths}; {fmt(calib)}")
    print(f"warm-up (unconstrained): {fmt(arm(False, lengths))}")
    wall_r, cpu_r = [], []
    for r in range(args.rounds):
        first_c = r % 2 == 1
        a = arm(first_c, lengths)
        b = arm(not first_c, lengths)
        c, u = (a, b) if first_c else (b, a)
        wall_r.append(c["tps"] / u["tps"])
        cpu_r.append(u["cpu_ms_tok"] / c["cpu_ms_tok"])
        print(f"round {r} ({'constrained' if first_c else 'unconstrained'} first): unconstrained {fmt(u)} | "
              f"constrained {fmt(c)} | wall ratio {wall_r[-1]:.3f}, CPU ratio {cpu_r[-1]:.3f}")
    print(f"constrained/unconstrained over {args.rounds} rounds, median (min-max): wall tok/s {med(wall_r)}; "
          f"tok per CPU-s {med(cpu_r)}; load average {os.getloadavg()[0]:.1f}")
finally:
    if server:
        server.terminate()
        server.wait(timeout=120)
