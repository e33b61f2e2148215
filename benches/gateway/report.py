"""Summarise a gateway benchmark results file (run.sh, JSON lines) as Markdown.

Every figure is the median over rounds; "x direct" is a gateway row's time
per call (and p50 latency) over the direct row of the same upstream
transport in the same round, then the median of those paired ratios.
"K CPU" is the whole machine's CPU time per call at K in flight (every
process of the path), and its ratio the work a call through the gateway
costs over a direct call, whatever the number of cores.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http-peers"))
from report import load, paired  # noqa: E402  (benches/http-peers/report.py)

# The machine's CPU time per call (client, gateway and echo server together).
CPU = "machine_cpu_us_per_call"

# Each gateway row and the direct row it is compared with.
BASELINE = {"relay-stdio": "direct-stdio", "gateway-stdio": "direct-stdio", "gateway-stdio-spread": "direct-stdio",
            "gateway-http-stdio-t0": "direct-stdio", "gateway-http-stdio-spread": "direct-stdio", "gateway-http": "direct-http", "gateway-http-stdio": "direct-stdio",
            "supergateway": "direct-stdio", "agentgateway": "direct-stdio",
            "gateway-http-before": "direct-http", "gateway-http-stdio-before": "direct-stdio"}

# The rows whose gateway process's own CPU is measured (run.sh's GW_PID).
GW_OWN_CPU = ["gateway-http", "gateway-http-stdio", "gateway-http-stdio-t0", "gateway-http-stdio-spread", "supergateway",
              "agentgateway", "gateway-http-before", "gateway-http-stdio-before"]

# The HTTP gateways in front of the stdio echo server: mcpvisor's and the peers'.
HTTP_OVER_STDIO = ["gateway-http-stdio", "supergateway", "agentgateway"]


def main(path):
    meta, runs, clients, med = load(path)

    def ratio(client, mode, key, inverse=False):
        return paired(runs, client, BASELINE.get(client, client), mode, key, inverse)

    def fmt(x, spec="{:,.0f}"):
        return "-" if x is None else spec.format(x)

    print(f"\nN={meta['n']}, K={meta['k']}, {meta['rounds']} rounds, medians\n")
    print("| path | seq calls/s | seq x direct | seq p50 us | K calls/s | K x direct | K p50 us | K p50 x direct "
          "| K CPU us/call | K CPU x direct |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in clients:
        print(f"| {c} | {fmt(med(c, 'seq', 'calls_per_s'))} | {fmt(ratio(c, 'seq', 'calls_per_s', True), '{:.2f}')} "
              f"| {fmt(med(c, 'seq', 'p50_us'), '{:.1f}')} | {fmt(med(c, 'conc', 'calls_per_s'))} "
              f"| {fmt(ratio(c, 'conc', 'calls_per_s', True), '{:.2f}')} | {fmt(med(c, 'conc', 'p50_us'), '{:.1f}')} "
              f"| {fmt(ratio(c, 'conc', 'p50_us'), '{:.2f}')} | {fmt(med(c, 'conc', CPU), '{:.1f}')} "
              f"| {fmt(ratio(c, 'conc', CPU), '{:.2f}')} |")

    if "relay-stdio" in clients and "gateway-stdio" in clients:
        print("\nThe stdio gateway over the floor of any process in the middle (stdio-relay: the same pipes and "
              "processes, bytes copied, nothing parsed), paired by round\n")
        print("| path | seq x relay | K x relay | K CPU x relay |")
        print("|---|---:|---:|---:|")
        over = [paired(runs, "gateway-stdio", "relay-stdio", m, k, inv)
                for m, k, inv in (("seq", "calls_per_s", True), ("conc", "calls_per_s", True), ("conc", CPU, False))]
        print("| gateway-stdio | " + " | ".join(fmt(x, "{:.2f}") for x in over) + " |")

    pairs = (("gateway-stdio-spread", "gateway-stdio"), ("gateway-http-stdio-spread", "gateway-http-stdio-t0"))
    spread = [(c, t0) for c, t0 in pairs if c in clients and t0 in clients]
    if spread:
        print("\nThe upstream connection on a thread of its own (MCPVISOR_CONNECTION_THREADS=nproc) over on the "
              "runtime's thread (=0; gateway-stdio is serve's stdio default), paired by round: calls/s and CPU per call\n")
        print("| path | seq calls/s x | K calls/s x | K CPU x | gateway CPU x (seq / K) |")
        print("|---|---:|---:|---:|---:|")
        for c, t0 in spread:
            cells = [paired(runs, c, t0, m, k, inv)
                     for m, k, inv in (("seq", "calls_per_s", False), ("conc", "calls_per_s", False), ("conc", CPU, False))]
            # Only a gateway the bench client does not start itself (HTTP) has its own CPU measured.
            own = " / ".join(fmt(paired(runs, c, t0, m, "gateway_cpu_us_per_call", False), "{:.2f}") for m in ("seq", "conc")) \
                if c in GW_OWN_CPU else "-"
            print(f"| {c} | " + " | ".join(fmt(x, "{:.2f}") for x in cells) + f" | {own} |")

    before = [(c, c + "-before") for c in ("gateway-http", "gateway-http-stdio") if c in clients and c + "-before" in clients]
    if before:
        print("\nMCPVISOR over MCPVISOR_BEFORE (the same rows of two binaries), paired by round: calls/s, the machine's "
              "CPU per call, and the gateway process's own CPU per call (seq / K)\n")
        print("| path | seq calls/s x | K calls/s x | K CPU x | gateway CPU us/call before (seq / K) "
              "| after (seq / K) | gateway CPU x (seq / K) |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for c, b in before:
            cells = [paired(runs, c, b, m, k, inv)
                     for m, k, inv in (("seq", "calls_per_s", False), ("conc", "calls_per_s", False), ("conc", CPU, False))]
            own = [fmt(med(x, m, "gateway_cpu_us_per_call")) for x in (b, c) for m in ("seq", "conc")]
            ratios = " / ".join(fmt(paired(runs, c, b, m, "gateway_cpu_us_per_call", False), "{:.2f}") for m in ("seq", "conc"))
            print(f"| {c} | " + " | ".join(fmt(x, "{:.2f}") for x in cells)
                  + f" | {own[0]} / {own[1]} | {own[2]} / {own[3]} | {ratios} |")

    peers = [c for c in HTTP_OVER_STDIO if c in clients]
    if len(peers) < 2:
        return
    print("\nHTTP gateways in front of the stdio echo server (gateway process only: its CPU per call and peak RSS; "
          "\"mcpvisor x\" is serve --http's calls/s over the row's, paired by round)\n")
    print("| gateway | seq calls/s | K calls/s | CPU us/call (seq / K) | peak RSS MB | mcpvisor x (seq / K) |")
    print("|---|---:|---:|---:|---:|---:|")
    for c in peers:
        cpu = " / ".join(fmt(med(c, m, "gateway_cpu_us_per_call")) for m in ("seq", "conc"))
        rss = med(c, "conc", "gateway_rss_kb") or med(c, "seq", "gateway_rss_kb")
        lead = " / ".join(fmt(paired(runs, "gateway-http-stdio", c, m, "calls_per_s"), "{:.2f}") for m in ("seq", "conc"))
        print(f"| {c} | {fmt(med(c, 'seq', 'calls_per_s'))} | {fmt(med(c, 'conc', 'calls_per_s'))} | {cpu} "
              f"| {fmt(rss and rss / 1024, '{:.1f}')} | {lead} |")


if __name__ == "__main__":
    main(sys.argv[1])
