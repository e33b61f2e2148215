#!/usr/bin/env bash
# The gateway on several cores: `serve --http --workers 1` against
# `--workers W`, both in front of the same stdio echo server, each loaded
# by CLIENTS bench clients at once (each its own session, K/CLIENTS calls
# in flight, K in all). docs/benchmarks.md ("The gateway on every core").
#
#   CLIENTS × bench_client ─HTTP──▶ mcpvisor serve --http --workers {1,W} ─stdio─▶ echo server
#
# Rounds alternate which gateway goes first; the ratio is paired within a
# round (W workers ÷ 1 worker, calls/s over the wall time of the batch).
# Each row also gives the gateway's own CPU per call (/proc/PID/stat) and
# the machine's (all processes), and, for the last round, the share of the
# W-worker gateway's CPU that fell on its runtime thread (hub, registry,
# upstream connections: the part that does not spread) against its workers
# and its connection threads (MCPVISOR_CONNECTION_THREADS; with one server,
# one of them carries every call).
#
# Knobs: N (calls per batch, all clients together, 20000), K (32), CLIENTS
# (4), WORKERS (2), ROUNDS (5), CPUS (a taskset list the gateways are
# pinned to, e.g. 0: one core), CONNECTION_THREADS (MCPVISOR_CONNECTION_THREADS
# for both gateways; unset: serve's default), MCPVISOR, MCPVISOR_BENCH,
# STDIO_ECHO as in run.sh.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-20000}
K=${K:-32}
CLIENTS=${CLIENTS:-4}
WORKERS=${WORKERS:-2}
ROUNDS=${ROUNDS:-5}
CPUS=${CPUS:-}
CONNECTION_THREADS=${CONNECTION_THREADS:-}
source "$HERE/setup.sh"

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

cat >"$SCRATCH/workers.toml" <<TOML
[servers.bench]
command = "$STDIO_ECHO"
max_in_flight = 1024
max_queued = 4096
TOML
export XDG_STATE_HOME=$SCRATCH/state
pin=()
[ -n "$CPUS" ] && pin=(taskset -c "$CPUS")
[ -n "$CONNECTION_THREADS" ] && export MCPVISOR_CONNECTION_THREADS=$CONNECTION_THREADS

declare -A URL PID
start_gateway() { # WORKERS: starts `serve --http --workers WORKERS`, records its URL and pid
    local log=$SCRATCH/serve-workers-$1.log url=
    "${pin[@]}" "$MCPVISOR" --config "$SCRATCH/workers.toml" serve --server bench --http 127.0.0.1:0 --workers "$1" \
        </dev/null >/dev/null 2>"$log" &
    pids+=($!)
    PID[$1]=$!
    for _ in $(seq 1 200); do
        url=$(sed -n 's/.*serving MCP at \(http[^ ]*\).*/\1/p' "$log")
        [ -n "$url" ] && break
        sleep 0.05
    done
    [ -n "$url" ] || { echo "serve --http --workers $1 did not start: $(cat "$log")" >&2; exit 1; }
    URL[$1]=$url
}
start_gateway 1
start_gateway "$WORKERS"

TICKS=$(getconf CLK_TCK)
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9; exit}' /proc/stat; }
# utime + stime of a process, or of one of its threads (/proc/PID/task/TID).
ticks_of() { sed 's/.*) //' "$1/stat" | awk '{print $12 + $13}'; }

RESULTS=$SCRATCH/results/workers-$(date -u +%Y%m%dT%H%M%SZ).jsonl
printf '{"n":%s,"k":%s,"clients":%s,"workers":%s,"rounds":%s,"cpus":"%s","connection_threads":"%s"}\n' \
    "$N" "$K" "$CLIENTS" "$WORKERS" "$ROUNDS" "$CPUS" "$CONNECTION_THREADS" >"$RESULTS"
per_client=$((N / CLIENTS))
in_flight=$((K / CLIENTS > 0 ? K / CLIENTS : 1))
calls=$((per_client * CLIENTS))
for round in $(seq 1 "$ROUNDS"); do
    order=(1 "$WORKERS")
    ((round % 2 == 0)) && order=("$WORKERS" 1)
    for workers in "${order[@]}"; do
        pid=${PID[$workers]}
        gateway_before=$(ticks_of "/proc/$pid")
        machine_before=$(busy_jiffies)
        started=$(date +%s%N)
        clients=()
        for c in $(seq 1 "$CLIENTS"); do
            "$MCPVISOR_BENCH" "${URL[$workers]}" conc "$per_client" "$in_flight" >"$SCRATCH/client-$c.json" &
            clients+=($!)
        done
        failed=0
        for client in "${clients[@]}"; do wait "$client" || failed=1; done
        ended=$(date +%s%N)
        ((failed)) && { echo "!! a client failed: workers $workers round $round" >&2; continue; }
        gateway_us=$(( ($(ticks_of "/proc/$pid") - gateway_before) * 1000000 / TICKS / calls ))
        machine_us=$(( ($(busy_jiffies) - machine_before) * 1000000 / TICKS / calls ))
        rate=$(( calls * 1000000000 / (ended - started) ))
        echo "{\"round\":$round,\"workers\":$workers,\"calls\":$calls,\"calls_per_s\":$rate,\"gateway_cpu_us_per_call\":$gateway_us,\"machine_cpu_us_per_call\":$machine_us}" |
            tee -a "$RESULTS" >&2
    done
done

# Where the W-worker gateway's CPU went, over its whole life.
pid=${PID[$WORKERS]}
runtime=0 workers_cpu=0 connections=0
for task in /proc/"$pid"/task/*; do
    case $(cat "$task/comm") in
        mcpvisor-runtim*) runtime=$((runtime + $(ticks_of "$task"))) ;;
        actix-rt*) workers_cpu=$((workers_cpu + $(ticks_of "$task"))) ;;
        mcpvisor-conn*) connections=$((connections + $(ticks_of "$task"))) ;;
    esac
done
echo "{\"threads_of\":$WORKERS,\"runtime_thread_ticks\":$runtime,\"worker_thread_ticks\":$workers_cpu,\"connection_thread_ticks\":$connections}" | tee -a "$RESULTS" >&2

python3 - "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
head, rows = rows[0], rows[1:]
split = [r for r in rows if "threads_of" in r]
rows = [r for r in rows if "round" in r]
w = head["workers"]
by = lambda n: [r for r in rows if r["workers"] == n]
print(f"N={head['n']} K={head['k']} clients={head['clients']} cpus={head['cpus'] or 'all'} "
      f"connection threads={head.get('connection_threads') or 'default'}")
print(f"{'workers':>8} {'calls/s':>9} {'gateway µs/call':>16} {'machine µs/call':>16}")
for n in (1, w):
    rs = by(n)
    if rs:
        med = lambda key: statistics.median(r[key] for r in rs)
        print(f"{n:>8} {med('calls_per_s'):>9.0f} {med('gateway_cpu_us_per_call'):>16.0f} {med('machine_cpu_us_per_call'):>16.0f}")
pairs = {}
for r in rows:
    pairs.setdefault(r["round"], {})[r["workers"]] = r["calls_per_s"]
ratios = sorted(p[w] / p[1] for p in pairs.values() if 1 in p and w in p)
if ratios:
    print(f"paired ratio {w} workers ÷ 1: median {statistics.median(ratios):.2f} (rounds: {', '.join(f'{x:.2f}' for x in ratios)})")
for s in split:
    runtime, spread, conn = s["runtime_thread_ticks"], s["worker_thread_ticks"], s.get("connection_thread_ticks", 0)
    total = runtime + spread + conn
    if total and w > 1:
        # The runtime thread is worker 0 too: take one worker's share off it
        # to leave what does not spread (hub, registry, accepting). The one
        # upstream server's connection thread is crossed by every call too.
        serial = max(runtime - spread / (w - 1), 0)
        print(f"{w}-worker gateway CPU: runtime thread {100 * runtime / total:.0f}% (not spread {100 * serial / total:.0f}%), "
              f"workers {100 * spread / total:.0f}%, the server's connection thread {100 * conn / total:.0f}%; "
              f"serial fraction s = {(serial + conn) / total:.2f}")
PY
