#!/usr/bin/env bash
# N tessera replicas behind SMG (the SGLang model gateway, PyPI `smg`), all on loopback.
#
#   scripts/cluster.sh [-n N] [-t THREADS] [-p POLICY] [--port PORT] [--model GGUF] [-- SERVE_ARGS...]
#
#   -n N            replicas (default 2), on ports PORT+1 .. PORT+N
#   -t THREADS      compute threads in all, split evenly between the replicas (default: every core)
#   -p POLICY       SMG policy: round_robin | cache_aware | consistent_hashing | least_load |
#                   power_of_two | prefix_hash | random (default cache_aware). consistent_hashing
#                   routes by the X-SMG-Routing-Key request header (tessera bench serve
#                   --workload multi-tenant sends one per session).
#   --port PORT     the gateway's port (default 9000); smg's own /metrics on PORT+N+1
#   --model GGUF    default: the binary's default model
#   --bin PATH      the tessera binary (default: $TESSERA_BIN, else the freshest build*/src/cli/tessera)
#   after --         passed to every `tessera serve` (e.g. --kv-cache 256MiB --max-model-len 4096)
#   SMG_ARGS        env: extra arguments for `smg launch`
#
# Installs smg with pip when the `smg` command is missing. Waits until every replica's /health and
# the gateway's /health answer 200, prints "cluster: ready http://127.0.0.1:PORT/v1" and stays in
# the foreground; Ctrl-C, SIGTERM or any exit stops everything it started (replicas get SIGTERM and
# drain; SIGKILL after 20 s). Logs: $CLUSTER_LOG_DIR (default /tmp/tessera_cluster.<gateway port>).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
replicas=2 threads=0 policy=cache_aware port=9000 model="" bin="${TESSERA_BIN:-}"
serve_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) replicas="$2"; shift 2 ;;
    -t|--threads) threads="$2"; shift 2 ;;
    -p|--policy) policy="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --) shift; serve_args=("$@"); break ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$replicas" =~ ^[1-9][0-9]*$ ]] || { echo "cluster: -n wants a positive count" >&2; exit 2; }
if [[ -z "$bin" ]]; then
  bin="$(ls -t "$here"/build*/src/cli/tessera 2>/dev/null | head -1 || true)"
fi
[[ -x "$bin" ]] || { echo "cluster: no tessera binary (build the tessera target or pass --bin)" >&2; exit 2; }
if [[ "$threads" == 0 ]]; then threads="$(nproc)"; fi
per_replica=$(( threads / replicas ))
if (( per_replica < 1 )); then per_replica=1; fi

if ! command -v smg >/dev/null 2>&1; then
  echo "cluster: installing smg (pip)" >&2
  python3 -m pip install -q smg >&2 || { echo "cluster: pip install smg failed" >&2; exit 3; }
fi

log_dir="${CLUSTER_LOG_DIR:-/tmp/tessera_cluster.$port}"
mkdir -p "$log_dir"
pids=()
stop_all() {
  trap - EXIT INT TERM
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 200); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    (( alive )) || break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "cluster: stopped" >&2
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

urls=()
model_args=()
[[ -n "$model" ]] && model_args=(--model "$model")
for i in $(seq 1 "$replicas"); do
  rport=$(( port + i ))
  "$bin" serve "${model_args[@]}" --host 127.0.0.1 --port "$rport" --threads "$per_replica" \
    "${serve_args[@]}" >"$log_dir/replica$i.log" 2>&1 &
  pids+=($!)
  urls+=("http://127.0.0.1:$rport")
  echo "cluster: replica $i pid $! on :$rport ($per_replica threads), log $log_dir/replica$i.log" >&2
done

wait_health() {  # url, what, pid-or-empty
  local deadline=$(( SECONDS + 180 ))
  until curl -fsS -o /dev/null --max-time 2 "$1/health"; do
    if [[ -n "${3:-}" ]] && ! kill -0 "$3" 2>/dev/null; then
      echo "cluster: $2 exited; its log:" >&2; tail -20 "$log_dir/$2.log" >&2 || true; exit 4
    fi
    (( SECONDS < deadline )) || { echo "cluster: $2 not healthy after 180 s" >&2; exit 4; }
    sleep 0.2
  done
}
for i in $(seq 1 "$replicas"); do wait_health "${urls[$((i - 1))]}" "replica$i" "${pids[$((i - 1))]}"; done

# Health every 2 s (default 60) so that a dead replica leaves the rotation quickly; smg's own
# Prometheus endpoint (default 0.0.0.0:29000) on loopback at PORT+N+1.
# shellcheck disable=SC2086
smg launch --host 127.0.0.1 --port "$port" --worker-urls "${urls[@]}" --policy "$policy" \
  --health-check-interval-secs 2 --health-failure-threshold 2 --health-success-threshold 1 \
  --prometheus-host 127.0.0.1 --prometheus-port $(( port + replicas + 1 )) \
  --log-level warn ${SMG_ARGS:-} >"$log_dir/smg.log" 2>&1 &
pids+=($!)
smg_pid=$!
echo "cluster: smg pid $smg_pid on :$port, policy $policy, log $log_dir/smg.log" >&2
wait_health "http://127.0.0.1:$port" smg "$smg_pid"
# The gateway answers /health before it has registered the workers: wait until it lists the model.
deadline=$(( SECONDS + 60 ))
until curl -fsS --max-time 2 "http://127.0.0.1:$port/v1/models" 2>/dev/null | grep -q '"id"'; do
  (( SECONDS < deadline )) || { echo "cluster: smg registered no worker in 60 s" >&2; exit 4; }
  sleep 0.2
done
echo "cluster: ready http://127.0.0.1:$port/v1"
# Stay up while the gateway runs; a signal ends the wait and the EXIT trap stops everything.
while kill -0 "$smg_pid" 2>/dev/null; do sleep 1 & wait $! || true; done
echo "cluster: smg exited" >&2
exit 1
