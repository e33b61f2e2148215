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
BASELINE = {"gateway-stdio": "direct-stdio", "gateway-http": "direct-http", "gateway-http-stdio": "direct-stdio"}


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


if __name__ == "__main__":
    main(sys.argv[1])
