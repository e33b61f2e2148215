#!/usr/bin/env bash
# Gateway overhead per call: the same bench client (examples/bench_client)
# against an echo server directly, and through `mcpvisor serve` in front of
# that server, over stdio and over HTTP. docs/benchmarks.md ("Through the
# gateway").
#
#   stdio:  bench_client ─stdio─▶ echo server
#           bench_client ─stdio─▶ mcpvisor serve ─stdio─▶ echo server
#   http:   bench_client ─HTTP──▶ http-echo-server
#           bench_client ─HTTP──▶ mcpvisor serve --http ─HTTP──▶ http-echo-server
#   http→stdio (for reference): bench_client ─HTTP──▶ serve --http ─stdio─▶ echo server
#
# The gateway runs `serve --server bench`, so the tool keeps its name and
# the client is the same in every row. Rounds alternate the order; report.py
# prints medians, and the ratios here are paired within
# a round (gateway ÷ direct of the same transport).
#
# Each row also records the machine's CPU time per call (all processes),
# the work a call costs whatever the cores: run it on a quiet machine.
#
# Knobs: N (calls, 20000), K (in flight, 32), ROUNDS (3), MODES ("seq conc"),
# MCPVISOR (release binary, default target/release/mcpvisor), MCPVISOR_BENCH
# (release examples/bench_client), STDIO_ECHO (a stdio MCP echo server; by
# default the shared peers' mcp-echo-server, built into $SCRATCH).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SCRATCH=${SCRATCH:-/tmp/gateway-bench}
N=${N:-20000}
K=${K:-32}
ROUNDS=${ROUNDS:-3}
read -r -a MODES <<<"${MODES:-seq conc}"
MCPVISOR=${MCPVISOR:-$ROOT/target/release/mcpvisor}
MCPVISOR_BENCH=${MCPVISOR_BENCH:-$ROOT/target/release/examples/bench_client}
PEERS=${PEERS:-$ROOT/../shared/bench/peers}
mkdir -p "$SCRATCH/results"

for f in "$MCPVISOR" "$MCPVISOR_BENCH"; do
    [ -x "$f" ] || { echo "missing $f: cargo build --release --bin mcpvisor --example bench_client" >&2; exit 1; }
done
echo "== building the echo servers into $SCRATCH (idempotent)" >&2
CARGO_TARGET_DIR=$SCRATCH/target cargo build --release --quiet --manifest-path "$ROOT/benches/http-peers/Cargo.toml" --bin http-echo-server
if [ -z "${STDIO_ECHO:-}" ]; then
    CARGO_TARGET_DIR=$SCRATCH/target cargo build --release --quiet --manifest-path "$PEERS/server/Cargo.toml"
    STDIO_ECHO=$SCRATCH/target/release/mcp-echo-server
fi

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

# The HTTP echo server prints its port once it listens.
exec 3< <(exec "$SCRATCH/target/release/http-echo-server" 0)
pids+=($!)
read -r port <&3 || { echo "http-echo-server did not start" >&2; exit 1; }
HTTP_ECHO=http://127.0.0.1:$port/mcp

# Limits lifted so the gateway's upstream connection is not the bound.
cat >"$SCRATCH/stdio.toml" <<TOML
[servers.bench]
command = "$STDIO_ECHO"
max_in_flight = 1024
max_queued = 4096
TOML
cat >"$SCRATCH/http.toml" <<TOML
[servers.bench]
transport = "http"
url = "$HTTP_ECHO"
max_in_flight = 1024
max_queued = 4096
TOML
# serve keeps its audit log on (its default, so it is measured), in the scratch directory.
export XDG_STATE_HOME=$SCRATCH/state
# serve over stdio, as bench_client starts a program without arguments.
cat >"$SCRATCH/gateway-stdio.sh" <<SH
#!/bin/sh
exec "$MCPVISOR" --config "$SCRATCH/stdio.toml" serve --server bench
SH
chmod +x "$SCRATCH/gateway-stdio.sh"

# `serve --http` on a free port; its stderr line says where.
start_http_gateway() { # CONFIG VAR: starts the gateway, sets VAR to its URL
    local log=$SCRATCH/serve-$2.log url=
    "$MCPVISOR" --config "$1" serve --server bench --http 127.0.0.1:0 </dev/null >/dev/null 2>"$log" &
    pids+=($!)
    for _ in $(seq 1 200); do
        url=$(sed -n 's/.*serving MCP at \(http[^ ]*\).*/\1/p' "$log")
        [ -n "$url" ] && break
        sleep 0.05
    done
    [ -n "$url" ] || { echo "serve --http did not start: $(cat "$log")" >&2; exit 1; }
    printf -v "$2" '%s' "$url"
}
start_http_gateway "$SCRATCH/http.toml" GW_HTTP
start_http_gateway "$SCRATCH/stdio.toml" GW_HTTP_STDIO

# CPU time of the whole machine (every process: client, gateway, echo
# server), in clock ticks: the work a call costs, whatever the cores.
TICKS=$(getconf CLK_TCK)
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9; exit}' /proc/stat; }

RESULTS=$SCRATCH/results/$(date -u +%Y%m%dT%H%M%SZ).jsonl
printf '{"n":%s,"k":%s,"rounds":%s}\n' "$N" "$K" "$ROUNDS" >"$RESULTS"
ROWS=("direct-stdio $STDIO_ECHO" "gateway-stdio $SCRATCH/gateway-stdio.sh" \
      "direct-http $HTTP_ECHO" "gateway-http $GW_HTTP" "gateway-http-stdio $GW_HTTP_STDIO")
for round in $(seq 1 "$ROUNDS"); do
    order=("${ROWS[@]}")
    if ((round % 2 == 0)); then
        for ((i = ${#ROWS[@]} - 1, j = 0; i >= 0; i--, j++)); do order[j]=${ROWS[i]}; done
    fi
    for mode in "${MODES[@]}"; do
        for row in "${order[@]}"; do
            read -r name server <<<"$row"
            case $mode in
                seq) args=(seq "$N") ;;
                conc) args=(conc "$N" "$K") ;;
            esac
            echo "-- round $round $mode $name" >&2
            before=$(busy_jiffies)
            if out=$("$MCPVISOR_BENCH" "$server" "${args[@]}"); then
                cpu_us=$(( ($(busy_jiffies) - before) * 1000000 / TICKS / N ))
                out=${out/\"client\":\"mcpvisor\"/\"client\":\"$name\"}
                echo "${out%\}},\"round\":$round,\"machine_cpu_us_per_call\":$cpu_us}" | tee -a "$RESULTS" >&2
            else
                echo "!! FAILED: $name $mode" >&2
            fi
        done
    done
done

python3 "$HERE/report.py" "$RESULTS"
