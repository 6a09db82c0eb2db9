#!/usr/bin/env python3
"""Kernel time by kind and the top kernels of an Nsight Compute CSV (bench/gpu/run.sh's ncu section).

usage: kernels.py NCU.csv [TOP]
NCU.csv: `ncu --csv --metrics gpu__time_duration.sum ...` (one row per kernel launch and metric). Prints the device
time of all launches by kind (bench/gpu/peers.py's kernel_kind, the same split as the eager loop's torch.profiler
summary) and the TOP (default 25) kernel names by total time, with launch counts.
"""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import kernel_kind  # noqa: E402

SCALE = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}  # -> ms


def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu prints its own log lines before the table
    by_name, launches = {}, {}
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ms = float(row["Metric Value"].replace(",", "")) * SCALE.get(row.get("Metric Unit", "nsecond"), 1e-6)
        name = row["Kernel Name"]
        by_name[name] = by_name.get(name, 0.0) + ms
        launches[name] = launches.get(name, 0) + 1
    total = sum(by_name.values()) or 1e-9
    kinds = {}
    for name, ms in by_name.items():
        kinds[kernel_kind(name)] = kinds.get(kernel_kind(name), 0.0) + ms
    print(f"{sum(launches.values())} launches, {total:.1f} ms of kernel time")
    for kind, ms in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:32s} {ms:9.1f} ms  {ms / total * 100:5.1f}%")
    print()
    print("| kernel | launches | ms | share |")
    print("|---|---:|---:|---:|")
    for name, ms in sorted(by_name.items(), key=lambda kv: -kv[1])[:top]:
        print(f"| `{name[:110]}` | {launches[name]} | {ms:.1f} | {ms / total * 100:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
