#!/usr/bin/env python3
"""The predictor's accuracy sweep: every example binary (each family under each policy) on its tiny preset, at 1 rank
and, for the data-parallel policies, at 2 and 4 ranks. Each run predicts its own peak (predict=true: a dry run of the
same experiment on the meta device, predict/dry_run.hpp) and measures it (the counting CPU allocator, highest rank);
the done record of its metrics file holds both. Fails when any prediction is off by more than --tolerance.

usage: predict_sweep.py EXAMPLES_DIR MPIEXEC [--tolerance 0.05] [--only SUBSTRING] [--part K/N] [--out FILE.md]
       predict_sweep.py EXAMPLES_DIR MPIEXEC --negative
--part K/N: only the K-th of N interleaved slices of the runs (ctest runs the sweep as N tests side by side).
--negative: the control; the prediction of a run of batch 2 x 64 tokens is compared with the measurement of batch
8 x 128, and the check must catch it (exit 0 only when it does).
Only the standard library is needed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

COMMON = ["model=tiny", "max_steps=2", "batch_size=2", "threads=1", "memory_every=1"]
FAMILY_ARGS = {"llama": ["seq_len=64"], "opt": ["seq_len=64"], "t5": ["seq_len=32"], "vit": [], "blip2": []}
DISTRIBUTED = ("ddp", "zero1", "zero2", "fsdp", "hsdp")


def binaries(examples):
    names = sorted(n for n in os.listdir(examples)
                   if os.access(os.path.join(examples, n), os.X_OK) and n.split("-")[0] in FAMILY_ARGS)
    return names


def run(examples, mpiexec, name, ranks, extra, workdir):
    metrics = os.path.join(workdir, f"{name}-{ranks}.jsonl")
    overridden = {e.split("=")[0] for e in extra}
    base = [a for a in COMMON + FAMILY_ARGS[name.split("-")[0]] if a.split("=")[0] not in overridden]
    args = [os.path.join(examples, name)] + base + extra + [f"metrics={metrics}"]
    if "hsdp" in name and ranks == 4:
        args.append("shard_group_size=2")  # two groups of two: sharded inside, replicated across
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [mpiexec, "-n", str(ranks), "--oversubscribe"] + args if ranks > 1 else args
    out = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    done = [json.loads(l) for l in open(metrics) if '"event":"done"' in l][0]
    return done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("examples")
    ap.add_argument("mpiexec")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--negative", action="store_true")
    ap.add_argument("--part", default="1/1")
    a = ap.parse_args()
    try:
        part, parts = (int(x) for x in a.part.split("/"))
        assert 1 <= part <= parts
    except (ValueError, AssertionError):
        ap.error(f"--part {a.part}: say K/N with 1 <= K <= N, such as 2/3")
    with tempfile.TemporaryDirectory() as work:
        if a.negative:
            small = run(a.examples, a.mpiexec, "llama-fp32", 1, [], work)
            large = run(a.examples, a.mpiexec, "llama-fp32", 1, ["batch_size=8", "seq_len=128"], work)
            err = abs(small["predicted_peak"] - large["peak"]) / large["peak"]
            caught = err > a.tolerance
            print(f"the prediction of batch 2 x 64 tokens against the measurement of batch 8 x 128: {100 * err:+.1f}% -> "
                  f"{'caught' if caught else 'NOT caught'} at {100 * a.tolerance:.0f}%")
            return 0 if caught else 1
        runs = [(name, ranks) for name in binaries(a.examples) if not a.only or a.only in name
                for ranks in ((1, 2, 4) if any(d in name for d in DISTRIBUTED) else (1,))]
        runs = runs[part - 1::parts]
        if not runs:
            print(f"no run matches --only '{a.only}' in part {a.part}")
            return 1
        rows, bad = [], []
        for name, ranks in runs:
            start = time.time()
            done = run(a.examples, a.mpiexec, name, ranks, [], work)
            if "predicted_peak" not in done:
                bad.append(f"{name} x{ranks}: no prediction in the done record")
                continue
            measured, predicted = done["peak"], done["predicted_peak"]
            err = (predicted - measured) / measured
            rows.append((name, ranks, predicted, measured, err, time.time() - start))
            flag = "" if abs(err) <= a.tolerance else "  <-- beyond tolerance"
            print(f"{name:34s} x{ranks}  predicted {predicted / 2**20:9.2f} MiB  measured {measured / 2**20:9.2f} "
                  f"MiB  {100 * err:+6.2f}%{flag}", flush=True)
            if flag:
                bad.append(f"{name} x{ranks}: {100 * err:+.2f}%")
        worst = max((abs(r[4]) for r in rows), default=0.0)
        print(f"{len(rows)} runs; worst error {100 * worst:.2f}% (tolerance {100 * a.tolerance:.0f}%)")
        if a.out:
            with open(a.out, "w") as f:
                f.write("| binary | ranks | predicted peak (MiB) | measured peak (MiB) | error |\n|---|---:|---:|---:|---:|\n")
                for name, ranks, p, m, e, _ in rows:
                    f.write(f"| {name} | {ranks} | {p / 2**20:.2f} | {m / 2**20:.2f} | {100 * e:+.2f}% |\n")
        if bad:
            print("beyond tolerance or missing:\n  " + "\n  ".join(bad))
            return 1
        return 0


if __name__ == "__main__":
    sys.exit(main())
