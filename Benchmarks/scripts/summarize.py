#!/usr/bin/env python3
"""Reads the text output of `swift package benchmark` and prints a Markdown table of median wall-clock times,
pairing each keychain benchmark with its plain-SQLite floor (same name with "sqlite" for "keychain").

Usage: swift package --disable-sandbox benchmark | tee run.txt; scripts/summarize.py run.txt
"""
import re
import sys

text = open(sys.argv[1], encoding="utf-8").read()
medians = {}
for block in re.split(r"\n(?=\S[^\n]*\n╒)", text):
    name = block.split("\n", 1)[0].strip()
    m = re.search(r"Time \(wall clock\) \((μs|ms|s|ns)\) \*?\s*│([^\n]*)", block)
    if not m:
        continue
    scale = {"ns": 0.001, "μs": 1, "ms": 1000, "s": 1_000_000}[m.group(1)]
    cols = [c.strip() for c in m.group(2).split("│")]
    medians[name] = float(cols[2]) * scale

print("| workload | keychain p50 (µs) | plain SQLite p50 (µs) | ratio |")
print("|---|---:|---:|---:|")
for name, value in medians.items():
    if not name.startswith("keychain"):
        continue
    floor = medians.get("sqlite" + name[len("keychain"):])
    if floor is None:
        print(f"| {name[len('keychain '):]} | {value:,.0f} | – | – |")
    else:
        print(f"| {name[len('keychain '):]} | {value:,.0f} | {floor:,.0f} | {value / floor:.2f}x |")
