#!/usr/bin/env bash
# MCP client overhead over Streamable HTTP: mcpvisor and rmcp's Streamable
# HTTP client against a raw HTTP floor, all talking to the same local server
# (http-echo-server), so only the client differs. docs/benchmarks.md.
#
# Builds the peers (idempotent; into $SCRATCH), starts the server on a free
# port, then runs ROUNDS rounds; in each, every mode runs every client back
# to back, the order reversed every other round. Prints medians (report.py).
#
# Knobs: N (calls, 20000), K (in flight, 32), ROUNDS (3), CONNECTS (20),
# CLIENTS ("floor mcpvisor rmcp-ct rmcp"), MCPVISOR_BENCH (the mcpvisor
# client: the built examples/bench_client, release), MCPVISOR_BEFORE (a
# second build of it, e.g. before a change: client `mcpvisor-before`, so
# before and after are paired in the same rounds), MODES ("seq conc connect").
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SCRATCH=${SCRATCH:-/tmp/http-peers}
N=${N:-20000}
K=${K:-32}
ROUNDS=${ROUNDS:-3}
CONNECTS=${CONNECTS:-20}
read -r -a CLIENTS <<<"${CLIENTS:-floor mcpvisor rmcp-ct rmcp}"
read -r -a MODES <<<"${MODES:-seq conc connect}"
export CARGO_TARGET_DIR=$SCRATCH/target
BIN=$CARGO_TARGET_DIR/release

echo "== building the peers into $SCRATCH (idempotent)" >&2
cargo build --release --quiet --manifest-path "$HERE/Cargo.toml"
mkdir -p "$SCRATCH/results"
RESULTS=$SCRATCH/results/$(date -u +%Y%m%dT%H%M%SZ).jsonl

# The server prints its port once it listens: reading it is the wait.
exec 3< <(exec "$BIN/http-echo-server" 0)
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
read -r PORT <&3 || { echo "http-echo-server did not start" >&2; exit 1; }
URL="http://127.0.0.1:$PORT/mcp"
echo "== server at $URL; results: $RESULTS" >&2

rmcp=$(grep -A1 '^name = "rmcp"$' "$HERE/Cargo.lock" | sed -n 's/^version = "\(.*\)"/\1/p')
printf '{"rustc":"%s","rmcp":"%s","n":%s,"k":%s,"rounds":%s,"connects":%s}\n' \
    "$(rustc --version | cut -d' ' -f2)" "$rmcp" "$N" "$K" "$ROUNDS" "$CONNECTS" >"$RESULTS"

client_cmd() {
    case $1 in
        floor) echo "$BIN/http-floor" ;;
        rmcp) echo "env RMCP_RUNTIME=multi_thread $BIN/rmcp-http-client" ;;
        rmcp-ct) echo "env RMCP_RUNTIME=current_thread $BIN/rmcp-http-client" ;;
        mcpvisor) echo "${MCPVISOR_BENCH:?set MCPVISOR_BENCH to the built bench_client example}" ;;
        mcpvisor-before) echo "${MCPVISOR_BEFORE:?set MCPVISOR_BEFORE to another build of bench_client}" ;;
        *) echo "unknown client $1" >&2; return 1 ;;
    esac
}

for round in $(seq 1 "$ROUNDS"); do
    order=("${CLIENTS[@]}")
    if ((round % 2 == 0)); then
        for ((i = ${#CLIENTS[@]} - 1, j = 0; i >= 0; i--, j++)); do order[j]=${CLIENTS[i]}; done
    fi
    for mode in "${MODES[@]}"; do
        for c in "${order[@]}"; do
            read -r -a cmd <<<"$(client_cmd "$c")"
            case $mode in
                seq) cmd+=("$URL" seq "$N") ;;
                conc) cmd+=("$URL" conc "$N" "$K") ;;
                connect) cmd+=("$URL" connect "$CONNECTS") ;;
            esac
            echo "-- round $round $mode $c" >&2
            if out=$("${cmd[@]}"); then
                # Named by how it was started (two builds of one client both call themselves mcpvisor).
                out=$(sed "s/\"client\":\"[^\"]*\"/\"client\":\"$c\"/" <<<"$out")
                echo "${out%\}},\"round\":$round}" | tee -a "$RESULTS" >&2
            else
                echo "!! FAILED: $c $mode (${cmd[*]})" >&2
            fi
        done
    done
done

python3 "$HERE/report.py" "$RESULTS"
