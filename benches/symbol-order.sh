#!/usr/bin/env bash
# Regenerates benches/symbol-order.txt: the functions the gateway and the stdio
# client run, hottest first, which build.rs hands the linker for release
# builds so that they sit together in a few pages of code (docs/benchmarks.md,
# "Code pages in the order calls touch them").
#
# Each run below is profiled under callgrind (valgrind), which counts every
# function that ran, however briefly: a sampling profiler would miss the
# start-up code that runs once and yet costs a page each.
#
#   1. serve --http in front of the stdio echo server (seq, then K=32)
#   2. serve --http in front of the HTTP echo server
#   3. serve over stdio (bench_client starts it)
#   4. bench_client itself, direct to the stdio echo server
#
# Needs valgrind and the release binaries (cargo build --release --bin
# mcpvisor --example bench_client); the names do not depend on the order the
# binaries were linked in. Knobs: SEQ (300 calls), CONC (3000 calls at K=32).
# After the next release build, where the order landed:
#   python3 benches/symbol_order.py --check target/release/mcpvisor benches/symbol-order.txt
set -euo pipefail

HERE=$(cd "$(dirname "$0")/gateway" && pwd)
source "$HERE/setup.sh"
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 1; }
CARGO_TARGET_DIR=$SCRATCH/target cargo build --release --quiet --manifest-path "$ROOT/benches/http-peers/Cargo.toml" --bin http-echo-server
SEQ=${SEQ:-300}
CONC=${CONC:-3000}
OUT=$SCRATCH/order
rm -rf "$OUT" && mkdir -p "$OUT"
export XDG_STATE_HOME=$OUT/state
GRIND=(valgrind --tool=callgrind --demangle=no --dump-instr=no --dump-line=no)

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

exec 3< <(exec "$SCRATCH/target/release/http-echo-server" 0)
pids+=($!)
read -r port <&3 || { echo "http-echo-server did not start" >&2; exit 1; }
cat >"$OUT/stdio.toml" <<TOML
[servers.bench]
command = "$STDIO_ECHO"
max_in_flight = 1024
max_queued = 4096
TOML
cat >"$OUT/http.toml" <<TOML
[servers.bench]
transport = "http"
url = "http://127.0.0.1:$port/mcp"
max_in_flight = 1024
max_queued = 4096
TOML

drive() { # drive SERVER: the same calls every profile makes
    "$MCPVISOR_BENCH" "$1" seq "$SEQ" >/dev/null
    "$MCPVISOR_BENCH" "$1" conc "$CONC" 32 >/dev/null
}

# An HTTP gateway under callgrind: started, driven, then stopped with SIGTERM
# so that callgrind writes its profile as the process exits.
http_gateway() { # http_gateway NAME CONFIG
    "${GRIND[@]}" --callgrind-out-file="$OUT/$1.cg" "$MCPVISOR" --config "$2" \
        serve --server bench --http 127.0.0.1:0 2>"$OUT/$1.log" &
    local pid=$! url=""
    for _ in $(seq 1 600); do
        url=$(grep -o 'http://[^ ]*/mcp' "$OUT/$1.log" | head -1 || true)
        [ -n "$url" ] && break
        kill -0 "$pid" 2>/dev/null || { cat "$OUT/$1.log" >&2; exit 1; }
        sleep 0.1
    done
    [ -n "$url" ] || { echo "$1: the gateway did not listen within 60 s" >&2; exit 1; }
    drive "$url"
    kill -TERM "$pid"
    wait "$pid" || true
}
echo "== 1. serve --http, stdio upstream" >&2
http_gateway http-stdio "$OUT/stdio.toml"
echo "== 2. serve --http, HTTP upstream" >&2
http_gateway http-http "$OUT/http.toml"

echo "== 3. serve over stdio" >&2
cat >"$OUT/gateway-stdio.sh" <<SH
#!/bin/sh
exec ${GRIND[*]} --callgrind-out-file="$OUT/stdio-%p.cg" --log-file="$OUT/stdio-%p.log" "$MCPVISOR" --config "$OUT/stdio.toml" serve --server bench
SH
chmod +x "$OUT/gateway-stdio.sh"
drive "$OUT/gateway-stdio.sh"

echo "== 4. the stdio client" >&2
"${GRIND[@]}" --callgrind-out-file="$OUT/client.cg" --log-file="$OUT/client.log" \
    "$MCPVISOR_BENCH" "$STDIO_ECHO" seq "$SEQ" >/dev/null
"${GRIND[@]}" --callgrind-out-file="$OUT/client-conc.cg" --log-file="$OUT/client-conc.log" \
    "$MCPVISOR_BENCH" "$STDIO_ECHO" conc "$CONC" 32 >/dev/null

# The runs, most important first: the stdio client (its binary carries the
# HTTP client too, which must not sit among its functions), serve --http
# in front of stdio (the gateway's benchmark against its peers), serve over
# stdio (each bench_client run starts one, each with its own profile),
# serve --http in front of HTTP.
shopt -s nullglob
stdio=("$OUT"/stdio-*.cg)
[ ${#stdio[@]} -gt 0 ] || { echo "serve over stdio wrote no profile" >&2; exit 1; }
python3 "$ROOT/benches/symbol_order.py" "$(basename "$MCPVISOR"),$(basename "$MCPVISOR_BENCH")" \
    "$ROOT/benches/symbol-order.txt" "$OUT/client.cg,$OUT/client-conc.cg" "$OUT/http-stdio.cg" \
    "$(IFS=,; echo "${stdio[*]}")" "$OUT/http-http.cg"
