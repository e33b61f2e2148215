#!/usr/bin/env python3
"""Merges callgrind profiles into a linker symbol-ordering file.

    symbol_order.py OBJECTS OUT RUN...
    symbol_order.py --check BINARY ORDER

Writes to OUT the mangled names of the functions of OBJECTS (substrings of
the objects' paths, comma-separated: "mcpvisor,bench_client") that ran in
any RUN. A RUN is one or more callgrind profiles, comma-separated, and the
runs are given most important first. Functions are grouped by the set of
runs that touched them, the groups sorted so that each run's functions
are as close together as they can be (the first run's all in one stretch,
the second's in at most two, ...), and hottest first within a group (each
profile's counts scaled to its own total). The linker places them first in
this order, so the code a run touches shares few pages and code a binary
carries for another run does not sit between them (benches/symbol-order.sh,
docs/benchmarks.md).
"""
import collections
import re
import subprocess
import sys

ENTRY = re.compile(r"\((\d+)\)(?: (.*))?")


def named(table, text):
    """callgrind's name compression: "(7) name" defines 7, "(7)" uses it."""
    m = ENTRY.match(text)
    if not m:
        return text
    if m.group(2) is not None:
        table[m.group(1)] = m.group(2)
    return table.get(m.group(1))


def costs(path, wanted):
    """Self cost (Ir) of each function of an object matching one of `wanted`."""
    own = collections.Counter()
    fns, obs = {}, {}
    ob = fn = None
    after_calls = False
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("ob="):
                ob = named(obs, line[3:])
            elif line.startswith("cob="):
                named(obs, line[4:])
            elif line.startswith("fn="):
                fn = named(fns, line[3:])
                after_calls = False
            elif line.startswith("cfn="):
                named(fns, line[4:])
            elif line.startswith("calls="):
                after_calls = True  # the next cost line is the callee's, not fn's
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_calls:
                    after_calls = False
                    continue
                parts = line.split()
                if len(parts) >= 2 and fn and ob and any(w in ob for w in wanted):
                    try:
                        own[fn] += int(parts[1])
                    except ValueError:
                        pass
    return own


def check(binary, order):
    """Where the ordered functions landed in `binary`'s text (`nm`): linked
    with the order, they are its first functions, one after the other."""
    wanted = [line.strip() for line in open(order) if line.strip()]
    rank = {name: i for i, name in enumerate(wanted)}
    nm = subprocess.run(["nm", "-n", "-S", "--defined-only", binary],
                        capture_output=True, text=True, check=True).stdout
    text = []
    for line in nm.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            text.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    if not text:
        sys.exit(f"{binary}: no functions in its symbol table")
    start = text[0][0]
    placed = [(addr, size) for addr, size, name in text if name in rank]
    if not placed:
        sys.exit(f"{binary}: none of the {len(wanted)} ordered functions is in it")
    end = max(addr + size for addr, size in placed)
    inside = sum(size for addr, size in placed)
    print(f"{binary}: {len(placed)} of {len(wanted)} ordered functions, "
          f"{inside / 1e6:.1f} MB of code within the first {(end - start) / 1e6:.1f} MB "
          f"of {(text[-1][0] - start) / 1e6:.1f} MB of text")
    # Linked in order, the functions that ran fill their span (a little is
    # alignment); linked without it, they are spread over the whole text.
    if inside < 0.8 * (end - start):
        sys.exit(f"{binary}: the ordered functions are spread out: linked without {order}?")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--check":
        return check(sys.argv[2], sys.argv[3])
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    wanted, out, runs = sys.argv[1].split(","), sys.argv[2], sys.argv[3:]
    weight = collections.Counter()
    touched = collections.defaultdict(set)  # function -> the runs that ran it
    for run, profiles in enumerate(runs):
        for path in profiles.split(","):
            own = costs(path, wanted)
            total = sum(own.values()) or 1
            for name, ir in own.items():
                if ir > 0:
                    weight[name] += ir / total
                    touched[name].add(run)

    # Lexicographic on "touched by run 0, by run 1, ...", touched first: run 0's
    # functions are one stretch, run 1's at most two, and so on.
    def place(name):
        return (tuple(run not in touched[name] for run in range(len(runs))), -weight[name], name)

    with open(out, "w") as f:
        for name in sorted(weight, key=place):
            f.write(name + "\n")
    print(f"{out}: {len(weight)} functions from {len(runs)} runs", file=sys.stderr)


if __name__ == "__main__":
    main()
