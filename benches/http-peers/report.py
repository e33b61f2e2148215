"""Summarise an HTTP benchmark results file (run.sh, JSON lines) as Markdown.

Every figure is the median over rounds; "x floor" is the client's cost over
the floor's in the same round (time per call, p50 latency, connect time),
then the median of those paired ratios.
"""

import json
import sys
from collections import defaultdict
from statistics import median


def load(path):
    """The run's settings, its records by (client, mode) then round, the
    clients in order of appearance, and the median of a key over rounds."""
    lines = [json.loads(line) for line in open(path) if line.strip()]
    meta, rows = lines[0], lines[1:]
    runs = defaultdict(dict)  # (client, mode) -> round -> record
    for row in rows:
        runs[row["client"], row["mode"]][row["round"]] = row
    clients = list(dict.fromkeys(row["client"] for row in rows))

    def med(client, mode, key):
        records = runs.get((client, mode))
        return median(r[key] for r in records.values()) if records else None

    return meta, runs, clients, med


def paired(runs, client, base, mode, key, inverse=False):
    """The median over rounds of client's key over base's in the same round."""
    mine, other = runs.get((client, mode), {}), runs.get((base, mode), {})
    pairs = [(mine[k][key], other[k][key]) for k in mine if k in other]
    return median((o / m) if inverse else (m / o) for m, o in pairs) if pairs else None


def main(path):
    meta, runs, clients, med = load(path)

    def ratio(client, mode, key, inverse=False):
        return paired(runs, client, "floor", mode, key, inverse)

    def fmt(x, spec="{:,.0f}"):
        return "-" if x is None else spec.format(x)

    print(f"\nrustc {meta['rustc']}, rmcp {meta['rmcp']}; N={meta['n']}, K={meta['k']}, "
          f"{meta['connects']} connects a run, {meta['rounds']} rounds, medians\n")
    print("| client | seq calls/s | seq x floor | seq p50 us | K calls/s | K x floor | K p50 us "
          "| connect p50 ms | connect x floor | peak RSS MB (seq / K) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in clients:
        rss = [med(c, m, "peak_rss_kb") for m in ("seq", "conc")]
        print(f"| {c} | {fmt(med(c, 'seq', 'calls_per_s'))} | {fmt(ratio(c, 'seq', 'calls_per_s', True), '{:.2f}')} "
              f"| {fmt(med(c, 'seq', 'p50_us'), '{:.1f}')} | {fmt(med(c, 'conc', 'calls_per_s'))} "
              f"| {fmt(ratio(c, 'conc', 'calls_per_s', True), '{:.2f}')} | {fmt(med(c, 'conc', 'p50_us'), '{:.1f}')} "
              f"| {fmt(med(c, 'connect', 'p50_us') and med(c, 'connect', 'p50_us') / 1000, '{:.2f}')} "
              f"| {fmt(ratio(c, 'connect', 'p50_us'), '{:.2f}')} "
              f"| {' / '.join(fmt(r and r / 1024, '{:.1f}') for r in rss)} |")


if __name__ == "__main__":
    main(sys.argv[1])
