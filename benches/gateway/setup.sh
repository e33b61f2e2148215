# Sourced by run.sh and workers.sh: the paths both use (ROOT, SCRATCH,
# MCPVISOR, MCPVISOR_BENCH, PEERS), the check that the release binaries are
# built, and STDIO_ECHO (the shared peers' echo server, built into $SCRATCH
# unless given).
ROOT=$(cd "$HERE/../.." && pwd)
SCRATCH=${SCRATCH:-/tmp/gateway-bench}
MCPVISOR=${MCPVISOR:-$ROOT/target/release/mcpvisor}
MCPVISOR_BENCH=${MCPVISOR_BENCH:-$ROOT/target/release/examples/bench_client}
PEERS=${PEERS:-$ROOT/../shared/bench/peers}
mkdir -p "$SCRATCH/results"

for f in "$MCPVISOR" "$MCPVISOR_BENCH"; do
    [ -x "$f" ] || { echo "missing $f: cargo build --release --bin mcpvisor --example bench_client" >&2; exit 1; }
done
if [ -z "${STDIO_ECHO:-}" ]; then
    echo "== building the stdio echo server into $SCRATCH (idempotent)" >&2
    CARGO_TARGET_DIR=$SCRATCH/target cargo build --release --quiet --manifest-path "$PEERS/server/Cargo.toml"
    STDIO_ECHO=$SCRATCH/target/release/mcp-echo-server
fi
