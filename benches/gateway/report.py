"""Summarise a gateway benchmark results file (run.sh, JSON lines) as Markdown.

Every figure is the median over rounds; "x direct" is a gateway row's time
per call (and p50 latency) over the direct row of the same upstream
transport in the same round, then the median of those paired ratios.
"""

import json
import sys
from collections import defaultdict
from statistics import median

# Each gateway row and the direct row it is compared with.
BASELINE = {"gateway-stdio": "direct-stdio", "gateway-http": "direct-http", "gateway-http-stdio": "direct-stdio"}


def main(path):
    lines = [json.loads(line) for line in open(path) if line.strip()]
    meta, rows = lines[0], lines[1:]
    runs = defaultdict(dict)  # (client, mode) -> round -> record
    for row in rows:
        runs[row["client"], row["mode"]][row["round"]] = row
    clients = list(dict.fromkeys(row["client"] for row in rows))

    def med(client, mode, key):
        records = runs.get((client, mode))
        return median(r[key] for r in records.values()) if records else None

    def ratio(client, mode, key, inverse=False):
        base = BASELINE.get(client, client)
        mine, direct = runs.get((client, mode), {}), runs.get((base, mode), {})
        pairs = [(mine[k][key], direct[k][key]) for k in mine if k in direct]
        return median((d / m) if inverse else (m / d) for m, d in pairs) if pairs else None

    def fmt(x, spec="{:,.0f}"):
        return "-" if x is None else spec.format(x)

    print(f"\nN={meta['n']}, K={meta['k']}, {meta['rounds']} rounds, medians\n")
    print("| path | seq calls/s | seq x direct | seq p50 us | K calls/s | K x direct | K p50 us | K p50 x direct |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in clients:
        print(f"| {c} | {fmt(med(c, 'seq', 'calls_per_s'))} | {fmt(ratio(c, 'seq', 'calls_per_s', True), '{:.2f}')} "
              f"| {fmt(med(c, 'seq', 'p50_us'), '{:.1f}')} | {fmt(med(c, 'conc', 'calls_per_s'))} "
              f"| {fmt(ratio(c, 'conc', 'calls_per_s', True), '{:.2f}')} | {fmt(med(c, 'conc', 'p50_us'), '{:.1f}')} "
              f"| {fmt(ratio(c, 'conc', 'p50_us'), '{:.2f}')} |")


if __name__ == "__main__":
    main(sys.argv[1])
