#!/usr/bin/env bash
# The stdio client against the raw-pipe floor and the other MCP clients
# (rmcp, the TypeScript and Python SDKs) on one shared echo server: runs the
# shared peers harness (PEERS, default ../shared/bench/peers beside the
# repository; its README has the method and knobs: N, K, ROUNDS, CLIENTS)
# with this crate's examples/bench_client, prints its tables, then draws
# the run as docs/charts/stdio-client.svg (CHART; "" for none).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${PEERS:-$ROOT/../shared/bench/peers}
SCRATCH=${SCRATCH:-/tmp/peers}
CHART=${CHART-$ROOT/docs/charts/stdio-client.svg}
export MCPVISOR_BENCH=${MCPVISOR_BENCH:-$ROOT/target/release/examples/bench_client}
export CLIENTS=${CLIENTS:-floor mcpvisor rmcp-ct ts-sdk py-sdk}
export SCRATCH
[ -x "$MCPVISOR_BENCH" ] || { echo "missing $MCPVISOR_BENCH: cargo build --release --example bench_client" >&2; exit 1; }
[ -x "$PEERS/run.sh" ] || { echo "no peers harness at $PEERS (set PEERS)" >&2; exit 1; }

marker=$(mktemp)
trap 'rm -f "$marker"' EXIT
bash "$PEERS/run.sh"
results=$(find "$SCRATCH/results" -name '*.jsonl' -newer "$marker" | sort | tail -1)
[ -n "$results" ] || { echo "the peers harness wrote no results file" >&2; exit 1; }
if [ -n "$CHART" ]; then
    mkdir -p "$(dirname "$CHART")"
    python3 "$ROOT/benches/support/chart.py" "$results" "$CHART" "stdio client: the raw-pipe floor, mcpvisor and other MCP clients, one echo server"
fi
