"""SVG charts of a benchmark results file, with no dependency beyond Python.

Every bench script here writes JSON lines of the same shape: one settings
line, then one record per run with "client", "mode" ("seq" or "conc"),
"k" (calls in flight; absent for seq, which is K=1), "calls_per_s",
"p50_us" and "round". This draws, for each client, the median over rounds
of calls/s and of p50 latency against K, side by side, on log scales:

    python3 chart.py RESULTS.jsonl OUT.svg "title"

Only records with both a K and a rate are drawn; a client with one K gets
a dot. Colours follow the client's position in the file, the floor or
direct path first by the scripts' order.
"""

import json
import math
import sys
from collections import defaultdict
from statistics import median

COLOURS = ["#444444", "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
PANEL_W, PANEL_H, MARGIN = 420, 300, 60


def series(path):
    """{client: {k: (median calls/s, median p50 us)}}, clients in file order."""
    lines = [json.loads(line) for line in open(path) if line.strip()]
    points = defaultdict(lambda: defaultdict(list))
    for row in lines[1:]:
        if row.get("mode") not in ("seq", "conc", "sweep") or "calls_per_s" not in row:
            continue
        k = 1 if row["mode"] == "seq" else int(row.get("k", 0))
        if k > 0:
            points[row["client"]][k].append((row["calls_per_s"], row["p50_us"]))
    return {
        client: {k: (median(r for r, _ in v), median(p for _, p in v)) for k, v in sorted(by_k.items())}
        for client, by_k in points.items()
    }


def log_ticks(lo, hi):
    """Powers of ten (and their 2× and 5×) that cover [lo, hi]."""
    ticks = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10**e
            if lo <= v <= hi:
                ticks.append(v)
    return ticks or [lo, hi]


def panel(x0, data, pick, y_label):
    """One log-log plot at horizontal offset x0: y = pick(point) against K."""
    ks = sorted({k for by_k in data.values() for k in by_k})
    ys = [pick(p) for by_k in data.values() for p in by_k.values() if pick(p) > 0]
    if not ks or not ys:
        return []
    kx = (min(ks), max(ks) if max(ks) > min(ks) else min(ks) * 2)
    ylo, yhi = min(ys) / 1.3, max(ys) * 1.3

    def px(k):
        return x0 + MARGIN + (math.log(k) - math.log(kx[0])) / (math.log(kx[1]) - math.log(kx[0])) * (PANEL_W - MARGIN - 10)

    def py(y):
        return 30 + (1 - (math.log(y) - math.log(ylo)) / (math.log(yhi) - math.log(ylo))) * (PANEL_H - 70)

    out = [f'<rect x="{x0 + MARGIN}" y="30" width="{PANEL_W - MARGIN - 10}" height="{PANEL_H - 70}" fill="none" stroke="#999"/>']
    for k in ks:
        out.append(f'<text x="{px(k):.1f}" y="{PANEL_H - 24}" text-anchor="middle">{k}</text>')
    for t in log_ticks(ylo, yhi):
        out.append(f'<line x1="{x0 + MARGIN}" x2="{x0 + PANEL_W - 10}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{x0 + MARGIN - 4}" y="{py(t) + 4:.1f}" text-anchor="end">{t:,g}</text>')
    out.append(f'<text x="{x0 + MARGIN + (PANEL_W - MARGIN) / 2:.0f}" y="{PANEL_H - 6}" text-anchor="middle">calls in flight (K)</text>')
    out.append(f'<text x="{x0 + 14}" y="{30 + (PANEL_H - 70) / 2:.0f}" text-anchor="middle" '
               f'transform="rotate(-90 {x0 + 14} {30 + (PANEL_H - 70) / 2:.0f})">{y_label}</text>')
    for i, (client, by_k) in enumerate(data.items()):
        colour = COLOURS[i % len(COLOURS)]
        pts = [(px(k), py(pick(p))) for k, p in by_k.items() if pick(p) > 0]
        if len(pts) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in pts]
    return out


def svg(data, title):
    """The whole chart: two panels and a legend under them."""
    width, legend_rows = 2 * PANEL_W + 20, math.ceil(len(data) / 3)
    height = PANEL_H + 40 + 18 * legend_rows
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2:.0f}" y="16" text-anchor="middle" font-size="13">{escape(title)}</text>']
    out += panel(0, data, lambda p: p[0], "calls/s (higher is better)")
    out += panel(PANEL_W + 20, data, lambda p: p[1], "p50 latency, µs (lower is better)")
    for i, client in enumerate(data):
        x, y = 20 + (i % 3) * (width // 3), PANEL_H + 30 + 18 * (i // 3)
        out.append(f'<rect x="{x}" y="{y - 9}" width="12" height="10" fill="{COLOURS[i % len(COLOURS)]}"/>')
        out.append(f'<text x="{x + 16}" y="{y}">{escape(client)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main(results, out, title):
    data = series(results)
    if not data:
        sys.exit(f"{results}: no seq or conc records to draw")
    with open(out, "w") as f:
        f.write(svg(data, title))
    print(f"chart: {out}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: chart.py RESULTS.jsonl OUT.svg TITLE")
    main(*sys.argv[1:])
