#!/usr/bin/env python3
"""Loss curves of bench/gpu/cases.sh's runs.

usage: losses.py collect DIR > refs.json      {case: [loss of each step]} from DIR/NAME.jsonl
       losses.py compare REFS.json DIR         a markdown table of each case of cases.txt: the CUDA run's losses
                                               against the CPU reference, max |a-b|/|b| over the steps, PASS/FAIL by
                                               the case's tolerance; fp32 sharded cases are also checked against
                                               one rank (llama-fp32). Exit 1 when a case fails or is missing.
TESSERA_CASES (a regular expression) keeps the cases whose names match it.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def cases():
    for line in open(os.path.join(HERE, "cases.txt")):
        f = line.split()
        if f and not f[0].startswith("#"):
            if re.search(os.environ.get("TESSERA_CASES", ""), f[0]):
                yield f[0], int(f[1]), float(f[2]), f[3]


def losses(path):
    if not os.path.exists(path):
        return None
    out = []
    for line in open(path):
        r = json.loads(line)
        if r.get("event") == "step":
            out.append(r["loss"])
    return out


def rel(a, b):
    if a is None or b is None or len(a) != len(b) or not a:
        return None
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))


def main():
    if sys.argv[1] == "collect":
        d = sys.argv[2]
        print(json.dumps({name: losses(os.path.join(d, name + ".jsonl")) for name, *_ in cases()}, indent=1))
        return 0
    refs, d = json.load(open(sys.argv[2])), sys.argv[3]
    bad = 0
    print("| case | ranks | CUDA losses | CPU losses | max rel diff | tolerance | |")
    print("|---|---|---|---|---|---|---|")
    one_rank = refs.get("llama-fp32")
    for name, ranks, tol, binary in cases():
        got, ref = losses(os.path.join(d, name + ".jsonl")), refs.get(name)
        diff = rel(got, ref)
        ok = diff is not None and diff <= tol
        extra = ""
        if ok and ranks > 1 and binary.endswith("-fp32") and one_rank:
            d1 = rel(got, one_rank)
            extra = f"; vs one rank {d1:.1e}" if d1 is not None else "; vs one rank: missing"
            ok = d1 is not None and d1 <= tol
        bad += not ok
        fmt = lambda v: "missing" if not v else " ".join(f"{x:.5f}" for x in v)
        print(f"| {name} | {ranks} | {fmt(got)} | {fmt(ref)} | "
              f"{'-' if diff is None else f'{diff:.1e}'}{extra} | {tol:g} | {'PASS' if ok else 'FAIL'} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
