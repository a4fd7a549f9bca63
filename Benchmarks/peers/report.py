#!/usr/bin/env python3
"""Turns the per-operation timings of run.sh into Markdown tables (medians, ratios, the issue's bars) and a chart.

    report.py RESULTS OPS STORE [CHART.png]
"""
import statistics
import sys
from collections import defaultdict

results, ops_count, store_size = sys.argv[1], sys.argv[2], sys.argv[3]
chart = sys.argv[4] if len(sys.argv) > 4 else None
times = defaultdict(list)
facts = {}
for line in open(results):
    if not line.strip():
        continue
    store, op, value = line.rstrip("\n").split("\t")
    if op in ("bytes-per-item", "names-readable"):
        facts[(store, op)] = value
    else:
        times[(store, op)].append(int(value) / 1000.0)

OPS = ["add", "find", "update", "delete", "unlock"]
WORKLOAD = OPS[:4]  # the chart's groups; unlock is a different kind of cost (a password's key derivation)
PER_PROCESS = ["security", "security-keychaind", "secret-tool", "pass", "keepassxc-cli"]
IN_PROCESS = ["native-api", "secretstorage (in-process)", "keyring-cryptfile (in-process)"]


def median(store, op):
    t = times.get((store, op))
    return statistics.median(t) if t else None


def cell(store, op):
    t = times.get((store, op))
    if not t:
        return "–"
    m = statistics.median(t)
    return f"{m:.3f} ({len(t)})" if m < 1 else f"{m:.1f} ({len(t)})"


def table(title, stores, with_disk):
    print(f"{title}\n")
    head = "| store | " + " | ".join(OPS) + " |"
    rule = "|---|" + "---:|" * len(OPS)
    if with_disk:
        head += " bytes on disk per item | service/account readable in files |"
        rule += "---:|---|"
    print(head)
    print(rule)
    for store in stores:
        row = f"| {store} | " + " | ".join(cell(store, op) for op in OPS) + " |"
        if with_disk:
            row += f" {facts.get((store, 'bytes-per-item'), '–')} | {facts.get((store, 'names-readable'), '–')} |"
        print(row)
    ours = stores[0]
    print(f"\nEach peer's median ÷ `{ours}`'s median (higher = this keychain faster):\n")
    print("| peer | " + " | ".join(OPS) + " |")
    print("|---|" + "---:|" * len(OPS))
    for store in stores[1:]:
        cells = []
        for op in OPS:
            a, b = median(ours, op), median(store, op)
            cells.append(f"{b / a:.2f}x" if a and b else "–")
        print(f"| {store} | " + " | ".join(cells) + " |")
    print()


print(f"Store of {store_size} items, then {ops_count} items added, found, updated and deleted, then unlocked "
      "with the password; median milliseconds per operation (number of operations timed; – where the store "
      "has no such operation).\n")
table("One process per operation (whole-process timing):", PER_PROCESS, True)
table("In-process (time of the call):", IN_PROCESS, False)

bars = [
    ("in-process find ≥ 100x faster than secretstorage", "native-api", "secretstorage (in-process)", "find", 100),
    ("`security` find ≥ 2x faster than `secret-tool`", "security", "secret-tool", "find", 2),
    ("`security` add ≥ 2x faster than `secret-tool`", "security", "secret-tool", "add", 2),
    ("`security` find through keychaind (password keychain) ≥ 3x faster than `secret-tool`", "security-keychaind",
     "secret-tool", "find", 3),
]
print("| bar | ratio | met |\n|---|---:|---|")
for name, ours, peer, op, target in bars:
    a, b = median(ours, op), median(peer, op)
    if a and b:
        print(f"| {name} | {b / a:.1f}x | {'yes' if b / a >= target else '**no**'} |")

if chart:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stores = PER_PROCESS + IN_PROCESS
    fig, ax = plt.subplots(figsize=(13, 5.5))
    width = 0.8 / len(stores)
    for index, store in enumerate(stores):
        values = [median(store, op) or 0 for op in WORKLOAD]
        positions = [o + (index - len(stores) / 2 + 0.5) * width for o in range(len(WORKLOAD))]
        ax.bar(positions, values, width, label=store, hatch="" if store in PER_PROCESS else "//")
    ax.set_yscale("log")
    ax.set_xticks(range(len(WORKLOAD)), WORKLOAD)
    ax.set_ylabel("median milliseconds per operation (log scale)")
    ax.set_title(f"Per-operation latency by store ({store_size}-item store, up to {ops_count} operations each)")
    ax.legend(fontsize=8, ncols=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(chart, dpi=110)
    print(f"\nChart: {chart}")
