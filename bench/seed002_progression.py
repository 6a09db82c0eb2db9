#!/usr/bin/env python3
"""Seed 002's single-device progression, from out-of-memory to fitting, as tessera examples on one model.

Runs each row's example binary for a few steps with a metrics file, then prints one markdown table of what
the memory table showed at step 1 (optimizer state allocated): the largest params / grads / optimizer figures
over the step's phases (device, and host memory under offload), the largest Acts, the step's peak, and the mean
step time of steps 1.. (step 0 includes one-time allocation).

usage: seed002_progression.py BUILD_DIR [--model tiny] [--seq-len 128] [--steps 3] [--device cpu] [--out FILE]
                               [--uniform B/A]
--uniform B/A runs every row with batch_size B and accumulate_grad_batches A instead of the seed's own, so
that the rows differ only in their policies.
Only the standard library is needed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# (row, example, batch_size, accumulate, extra key=value) as in seed 002's tables (precision in the binary).
ROWS = [
    ("Baseline (32-true, AdamW)", "llama-fp32", 32, 1, []),
    ("Reduced batch size", "llama-fp32", 16, 1, []),
    ("Gradient accumulation", "llama-fp32", 16, 4, []),
    ("Reduced precision (bf16-true)", "llama-bf16true", 16, 4, []),
    ("Mixed precision (bf16-mixed)", "llama-bf16mixed", 16, 4, []),
    ("Optimizer without state (SGD)", "llama-sgd-bf16true", 16, 4, []),
    ("8-bit optimizer (Adam8bit)", "llama-adam8bit-bf16true", 2, 2, []),
    ("Activation checkpointing", "llama-adam8bit-bf16true-ckpt", 2, 2, []),
    ("CPU offload (OffloadOptimizer)", "llama-offload-bf16true", 16, 4, []),
    ("LoRA (32-true)", "llama-lora-fp32", 32, 2, []),
    ("QLoRA (32-true)", "llama-qlora-fp32", 64, 1, []),
    ("QLoRA (bf16-mixed)", "llama-qlora-bf16mixed", 64, 1, []),
]

MIB = 1024.0 * 1024.0


def run_row(build, example, batch, accumulate, extra, a, workdir):
    exe = os.path.join(build, "examples", example)
    metrics = os.path.join(workdir, example + f"-{batch}x{accumulate}.jsonl")
    cmd = [exe, f"model={a.model}", f"seq_len={a.seq_len}", f"batch_size={batch}",
           f"accumulate_grad_batches={accumulate}", f"max_steps={a.steps}", f"device={a.device}",
           f"metrics={metrics}", "log_every=1000"] + extra
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:  # e.g. out of memory: the seed's point; the row says so and the table goes on
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"failed": f"exit {proc.returncode}: {last[:120]}"}
    records = [json.loads(line) for line in open(metrics)]
    mem = [r for r in records if r.get("event") == "memory" and r["step"] == 1]
    steps = [r for r in records if r.get("event") == "step"]
    done = [r for r in records if r.get("event") == "done"][0]
    top = lambda k: max(r.get(k, 0) for r in mem)
    times = [r["step_ms"] for r in steps[1:]] or [steps[0]["step_ms"]]
    return {
        "params": top("params"), "params_cpu": top("params_cpu"), "grads": top("grads"),
        "grads_cpu": top("grads_cpu"), "optim": top("optim"), "optim_cpu": top("optim_cpu"),
        "acts": top("acts"), "peak": top("peak"), "step_ms": sum(times) / len(times),
        "tok_s": done["tokens_per_s"],
    }


def fmt(device, host):
    s = f"{device / MIB:.2f}"
    return s + (f" (+{host / MIB:.2f} CPU)" if host else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out")
    ap.add_argument("--uniform", help="B/A: the same batch and accumulation for every row")
    a = ap.parse_args()
    rows = ROWS
    if a.uniform:
        b, acc = (int(x) for x in a.uniform.split("/"))
        rows = [(row, ex, b, acc, extra) for row, ex, _, _, extra in ROWS if row != "Reduced batch size"]
    lines = [f"model `{a.model}`, seq_len {a.seq_len}, {a.steps} steps, device {a.device}; MiB at step 1 "
             "(largest over its phases); peak = the step's allocator high-water mark", "",
             "| row | example | batch/accum | params | grads | optim | acts | peak | step ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as d:
        for row, example, batch, acc, extra in rows:
            r = run_row(a.build, example, batch, acc, extra, a, d)
            if "failed" in r:
                lines.append(f"| {row} | `{example}` | {batch}/{acc} | failed ({r['failed']}) | | | | | |")
                print(lines[-1], file=sys.stderr)
                continue
            lines.append(f"| {row} | `{example}` | {batch}/{acc} | {fmt(r['params'], r['params_cpu'])} | "
                         f"{fmt(r['grads'], r['grads_cpu'])} | {fmt(r['optim'], r['optim_cpu'])} | "
                         f"{r['acts'] / MIB:.2f} | {r['peak'] / MIB:.2f} | {r['step_ms']:.0f} |")
            print(lines[-1], file=sys.stderr)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
