#!/usr/bin/env python3
"""Checks a trace= file (report/timeline.hpp) the way a user opens it in Perfetto.

usage: check_trace.py TRACE.json RANKS KIND[,KIND...]
  RANKS  the lanes expected: processes named "rank 0" .. "rank RANKS-1"
  KIND   event names' first words each rank must show at least once ("forward", "backward", "all-gather",
         "reduce-scatter", "all-reduce", "optimizer", "host", "device", "step", "micro-step"); collectives and copies
         must carry bytes > 0
Also: well-formed JSON with traceEvents; every complete event has ts >= 0, dur >= 0 and a lane that exists; each
rank's steps are in order and its forward and backward events lie inside its steps. Exit 1 with the reason otherwise.
"""
import json
import sys


def fail(msg):
    print(f"check_trace: {msg}")
    sys.exit(1)


def main():
    path, ranks, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
    try:
        trace = json.load(open(path))
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{path}: not a JSON file ({e})")
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        fail("no traceEvents list")
    lanes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    if sorted(lanes.values()) != sorted(f"rank {r}" for r in range(ranks)):
        fail(f"lanes {sorted(lanes.values())}, expected rank 0 .. rank {ranks - 1}")
    per_rank = {pid: [] for pid in lanes}
    for e in events:
        if e.get("ph") != "X":
            continue
        if e["pid"] not in lanes:
            fail(f"event {e['name']} on pid {e['pid']}, which has no lane")
        if e["ts"] < 0 or e["dur"] < 0:
            fail(f"event {e['name']} at ts {e['ts']} dur {e['dur']}")
        per_rank[e["pid"]].append(e)
    for pid, evs in per_rank.items():
        first = {e["name"].split(" ")[0] for e in evs}
        for k in kinds:
            if k not in first:
                fail(f"{lanes[pid]} shows no '{k}' event (it has: {', '.join(sorted(first))})")
        for e in evs:
            if e["cat"] in ("collective", "copy") and e["name"].split(" ")[0] != "barrier" and e["args"]["bytes"] <= 0:
                fail(f"{lanes[pid]}: {e['name']} carries no bytes")
        steps = sorted((e for e in evs if e["name"].startswith("step ")), key=lambda e: e["ts"])
        if [int(e["name"].split()[1]) for e in steps] != list(range(len(steps))):
            fail(f"{lanes[pid]}: steps {[e['name'] for e in steps]} out of order")
        for e in evs:
            if e["cat"] == "compute" and not any(s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"]
                                                 for s in steps):
                fail(f"{lanes[pid]}: {e['name']} at {e['ts']} lies outside every step")
    n = sum(len(v) for v in per_rank.values())
    print(f"check_trace: {path}: {ranks} lane(s), {n} events, each rank shows {', '.join(kinds)}")


if __name__ == "__main__":
    main()
