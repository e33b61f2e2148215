#!/usr/bin/env bash
# Gateway overhead per call: the same bench client (examples/bench_client)
# against an echo server directly, and through `mcpvisor serve` in front of
# that server, over stdio and over HTTP. docs/benchmarks.md ("Through the
# gateway").
#
#   stdio:  bench_client ─stdio─▶ echo server
#           bench_client ─stdio─▶ stdio-relay ─stdio─▶ echo server   (the floor of any process in the middle)
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
# Peers, in front of the same stdio echo server over Streamable HTTP, beside
# `gateway-http-stdio`: supergateway (npm, pinned below; installed into
# $SCRATCH when npm is there) and agentgateway when AGENTGATEWAY names its
# binary (built with the recipe its benchmark folder describes). For every
# long-running HTTP gateway the record also has the gateway process's own
# CPU per call (utime+stime of that process only) and its peak RSS so far.
#
# Knobs: N (calls, 20000), K (in flight, 32), ROUNDS (3), MODES ("seq conc"),
# KS (more K for the chart, e.g. "1 4 16 64": recorded as mode "sweep"),
# GATEWAY_PEERS ("supergateway", or ""), AGENTGATEWAY (its binary),
# MCPVISOR (release binary, default target/release/mcpvisor), MCPVISOR_BENCH
# (release examples/bench_client), STDIO_ECHO (a stdio MCP echo server; by
# default the shared peers' mcp-echo-server, built into $SCRATCH), CHART
# (the SVG written from the run; docs/charts/gateway.svg, "" for none),
# MCPVISOR_BEFORE (a second mcpvisor binary, e.g. built from a branch's
# base: adds the rows gateway-http-before and gateway-http-stdio-before,
# paired with the same rows of MCPVISOR in each round), ONLY (the rows to
# run, by name, e.g. "direct-http gateway-http gateway-http-before"; all by default).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-20000}
K=${K:-32}
ROUNDS=${ROUNDS:-3}
read -r -a MODES <<<"${MODES:-seq conc}"
source "$HERE/setup.sh"
echo "== building the HTTP echo server into $SCRATCH (idempotent)" >&2
CARGO_TARGET_DIR=$SCRATCH/target cargo build --release --quiet --manifest-path "$ROOT/benches/http-peers/Cargo.toml" --bin http-echo-server --bin stdio-relay

SUPERGATEWAY_VERSION=4.0.0
read -r -a GATEWAY_PEERS <<<"${GATEWAY_PEERS-supergateway}"
read -r -a KS <<<"${KS:-}"
CHART=${CHART-$ROOT/docs/charts/gateway.svg}
if [[ " ${GATEWAY_PEERS[*]} " == *" supergateway "* ]]; then
    if [ ! -x "$SCRATCH/node/node_modules/.bin/supergateway" ]; then
        echo "== installing supergateway@$SUPERGATEWAY_VERSION into $SCRATCH/node" >&2
        mkdir -p "$SCRATCH/node" && npm install --silent --prefix "$SCRATCH/node" "supergateway@$SUPERGATEWAY_VERSION" >&2
    fi
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
# The floor of a process in the middle: bytes copied both ways, nothing parsed.
# The gateways on connection threads both ways (issue 33), whatever serve's
# default on this machine: *-spread with MCPVISOR_CONNECTION_THREADS=$(nproc)
# (the connection on a thread of its own), *-t0 with 0 (on the runtime's
# thread); gateway-stdio and gateway-http-stdio are serve's defaults.
cat >"$SCRATCH/gateway-stdio-spread.sh" <<SH
#!/bin/sh
MCPVISOR_CONNECTION_THREADS=$(nproc) exec "$MCPVISOR" --config "$SCRATCH/stdio.toml" serve --server bench
SH
chmod +x "$SCRATCH/gateway-stdio-spread.sh"
cat >"$SCRATCH/relay-stdio.sh" <<SH
#!/bin/sh
exec "$SCRATCH/target/release/stdio-relay" "$STDIO_ECHO"
SH
chmod +x "$SCRATCH/relay-stdio.sh"

# `serve --http` on a free port; its stderr line says where.
start_http_gateway() { # CONFIG VAR [CONNECTION_THREADS] [BINARY]: starts the gateway, sets VAR to its URL
    local log=$SCRATCH/serve-$2.log url=
    env ${3:+MCPVISOR_CONNECTION_THREADS=$3} "${4:-$MCPVISOR}" --config "$1" serve --server bench --http 127.0.0.1:0 </dev/null >/dev/null 2>"$log" &
    pids+=($!)
    for _ in $(seq 1 200); do
        url=$(sed -n 's/.*serving MCP at \(http[^ ]*\).*/\1/p' "$log" 2>/dev/null || true)
        [ -n "$url" ] && break
        sleep 0.05
    done
    [ -n "$url" ] || { echo "serve --http did not start: $(cat "$log")" >&2; exit 1; }
    printf -v "$2" '%s' "$url"
}
start_http_gateway "$SCRATCH/http.toml" GW_HTTP
start_http_gateway "$SCRATCH/stdio.toml" GW_HTTP_STDIO
start_http_gateway "$SCRATCH/stdio.toml" GW_HTTP_STDIO_T0 0
start_http_gateway "$SCRATCH/stdio.toml" GW_HTTP_STDIO_SPREAD "$(nproc)"
declare -A GW_PID=([gateway-http]=${pids[-4]} [gateway-http-stdio]=${pids[-3]} [gateway-http-stdio-t0]=${pids[-2]}
                   [gateway-http-stdio-spread]=${pids[-1]})
ROWS=("direct-stdio $STDIO_ECHO" "relay-stdio $SCRATCH/relay-stdio.sh" "gateway-stdio $SCRATCH/gateway-stdio.sh" \
      "gateway-stdio-spread $SCRATCH/gateway-stdio-spread.sh" "direct-http $HTTP_ECHO" "gateway-http $GW_HTTP" \
      "gateway-http-stdio $GW_HTTP_STDIO" "gateway-http-stdio-t0 $GW_HTTP_STDIO_T0" \
      "gateway-http-stdio-spread $GW_HTTP_STDIO_SPREAD")
if [ -n "${MCPVISOR_BEFORE:-}" ]; then
    start_http_gateway "$SCRATCH/http.toml" GW_HTTP_BEFORE "" "$MCPVISOR_BEFORE"
    start_http_gateway "$SCRATCH/stdio.toml" GW_HTTP_STDIO_BEFORE "" "$MCPVISOR_BEFORE"
    GW_PID[gateway-http-before]=${pids[-2]}
    GW_PID[gateway-http-stdio-before]=${pids[-1]}
    ROWS+=("gateway-http-before $GW_HTTP_BEFORE" "gateway-http-stdio-before $GW_HTTP_STDIO_BEFORE")
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_listening() { # PORT NAME LOG
    for _ in $(seq 1 200); do
        (exec 9<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "$2 did not listen on port $1: $(tail -5 "$3")" >&2
    exit 1
}
if [[ " ${GATEWAY_PEERS[*]} " == *" supergateway "* ]]; then
    port=$(free_port)
    node "$SCRATCH/node/node_modules/supergateway/dist/index.js" --stdio "$STDIO_ECHO" \
        --outputTransport streamableHttp --stateful --port "$port" --logLevel none \
        </dev/null >"$SCRATCH/supergateway.log" 2>&1 &
    pids+=($!)
    GW_PID[supergateway]=$!
    wait_listening "$port" supergateway "$SCRATCH/supergateway.log"
    ROWS+=("supergateway http://127.0.0.1:$port/mcp")
fi
if [ -n "${AGENTGATEWAY:-}" ]; then
    port=$(free_port)
    cat >"$SCRATCH/agentgateway.yaml" <<YAML
config:
  adminAddr: "off"
  statsAddr: "off"
  readinessAddr: "off"
  logging:
    level: warn
gateways:
  bench:
    port: $port
mcp:
  gateways: [bench]
  prefixMode: conditional
  targets:
  - name: echo
    stdio:
      cmd: $STDIO_ECHO
YAML
    "$AGENTGATEWAY" -f "$SCRATCH/agentgateway.yaml" </dev/null >"$SCRATCH/agentgateway.log" 2>&1 &
    pids+=($!)
    GW_PID[agentgateway]=$!
    wait_listening "$port" agentgateway "$SCRATCH/agentgateway.log"
    ROWS+=("agentgateway http://127.0.0.1:$port/mcp")
fi
# A long-running gateway's own CPU ticks (all its threads, not its children).
process_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
peak_rss_kb() { awk '/^VmHWM:/{print $2}' "/proc/$1/status"; }

# CPU time of the whole machine (every process: client, gateway, echo
# server), in clock ticks: the work a call costs, whatever the cores.
TICKS=$(getconf CLK_TCK)
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9; exit}' /proc/stat; }

if [ -n "${ONLY:-}" ]; then
    kept=()
    for row in "${ROWS[@]}"; do [[ " $ONLY " == *" ${row%% *} "* ]] && kept+=("$row"); done
    ROWS=("${kept[@]}")
fi

RESULTS=$SCRATCH/results/$(date -u +%Y%m%dT%H%M%SZ).jsonl
printf '{"n":%s,"k":%s,"rounds":%s}\n' "$N" "$K" "$ROUNDS" >"$RESULTS"
SWEEP=()
for k in "${KS[@]}"; do [ "$k" != "$K" ] && SWEEP+=("sweep:$k"); done
for round in $(seq 1 "$ROUNDS"); do
    order=("${ROWS[@]}")
    if ((round % 2 == 0)); then
        for ((i = ${#ROWS[@]} - 1, j = 0; i >= 0; i--, j++)); do order[j]=${ROWS[i]}; done
    fi
    for mode in "${MODES[@]}" "${SWEEP[@]}"; do
        for row in "${order[@]}"; do
            read -r name server <<<"$row"
            case $mode in
                seq) args=(seq "$N") ;;
                conc) args=(conc "$N" "$K") ;;
                sweep:*) args=(conc "$N" "${mode#sweep:}") ;;
            esac
            echo "-- round $round $mode $name" >&2
            gw=${GW_PID[$name]:-}
            before=$(busy_jiffies)
            [ -n "$gw" ] && gw_before=$(process_ticks "$gw")
            if out=$("$MCPVISOR_BENCH" "$server" "${args[@]}"); then
                cpu_us=$(( ($(busy_jiffies) - before) * 1000000 / TICKS / N ))
                out=${out/\"client\":\"mcpvisor\"/\"client\":\"$name\"}
                [[ $mode == sweep:* ]] && out=${out/\"mode\":\"conc\"/\"mode\":\"sweep\"}
                extra=",\"round\":$round,\"machine_cpu_us_per_call\":$cpu_us"
                if [ -n "$gw" ]; then
                    gw_us=$(( ($(process_ticks "$gw") - gw_before) * 1000000 / TICKS / N ))
                    extra+=",\"gateway_cpu_us_per_call\":$gw_us,\"gateway_rss_kb\":$(peak_rss_kb "$gw")"
                fi
                echo "${out%\}}$extra}" | tee -a "$RESULTS" >&2
            else
                echo "!! FAILED: $name $mode" >&2
            fi
        done
    done
done

python3 "$HERE/report.py" "$RESULTS"
if [ -n "$CHART" ]; then
    mkdir -p "$(dirname "$CHART")"
    python3 "$ROOT/benches/support/chart.py" "$RESULTS" "$CHART" \
        "Through the gateway: direct, mcpvisor serve and peers, one echo server (N=$N, $ROUNDS rounds, medians)"
fi
