#!/usr/bin/env python3
"""Turns the per-operation timings of run.sh into a Markdown table with ratios against this keychain."""
import statistics
import sys
from collections import defaultdict

rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
items = sys.argv[2]
times = defaultdict(list)
facts = {}
for store, op, value in rows:
    if op in ("bytes-per-item", "names-readable"):
        facts[(store, op)] = value
    else:
        times[(store, op)].append(int(value) / 1000.0)

stores = ["security", "secret-tool", "pass"]
ops = ["add", "find", "update", "delete"]
print(f"Whole-process timing, one process per operation, {items} items; median (mean) ms per operation.\n")
print("| store | " + " | ".join(ops) + " | bytes on disk per item | service/account readable in files |")
print("|---|" + "---:|" * len(ops) + "---:|---|")
for store in stores:
    cells = []
    for op in ops:
        t = times.get((store, op))
        cells.append(f"{statistics.median(t):.1f} ({statistics.mean(t):.1f})" if t else "–")
    print(f"| {store} | " + " | ".join(cells) + f" | {facts.get((store, 'bytes-per-item'), '–')} | "
          f"{facts.get((store, 'names-readable'), '–')} |")
print("\nRatio of each peer's median to this keychain's `security` median (higher = this keychain faster):\n")
print("| peer | " + " | ".join(ops) + " |")
print("|---|" + "---:|" * len(ops))
for store in stores[1:]:
    cells = []
    for op in ops:
        ours, theirs = times.get(("security", op)), times.get((store, op))
        cells.append(f"{statistics.median(theirs) / statistics.median(ours):.2f}x" if ours and theirs else "–")
    print(f"| {store} | " + " | ".join(cells) + " |")
