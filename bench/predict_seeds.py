#!/usr/bin/env python3
"""The predictor's answers for the seeds' full-size steps: each catalogue binary of seeds 001, 002 and 003 run with
--dry-run on its seed's GPU (device=cuda; 80 GiB, and for seed 002 also the 40 GiB A100 with the seed's A100
settings), next to what the seed says happens. Prints one markdown table (or writes it with --out).

usage: predict_seeds.py BUILD_DIR [--out FILE.md]
Only the standard library is needed; each dry run takes a few seconds on one CPU core and allocates no weights.
"""
import argparse
import re
import subprocess
import sys

# (seed, step binary, ranks, extra args, what the seed says)
ROWS = [
    ("002", "seed002-baseline", 1, "", "OOM (after the optimizer step)"),
    ("002", "seed002-reduced-batch", 1, "", "fits"),
    ("002", "seed002-grad-accum", 1, "", "fits"),
    ("002", "seed002-bf16-true", 1, "", "fits"),
    ("002", "seed002-bf16-mixed", 1, "", "fits"),
    ("002", "seed002-larger-model", 1, "", "fits"),
    ("002", "seed002-even-larger", 1, "", "OOM"),
    ("002", "seed002-xxl-batch1", 1, "", "OOM"),
    ("002", "seed002-sgd", 1, "", "fits"),
    ("002", "seed002-adam8bit", 1, "", "fits"),
    ("002", "seed002-act-ckpt", 1, "", "fits"),
    ("002", "seed002-cpu-offload", 1, "", "fits (optimizer in host memory)"),
    ("002", "seed002-lora", 1, "", "fits"),
    ("002", "seed002-qlora", 1, "", "fits"),
    ("001", "seed001-llama7b-1gpu", 1, "", "fits, close to 80 GB"),
    ("001", "seed001-llama7b-ddp", 4, "", "fits, no memory saved"),
    ("001", "seed001-llama7b-fsdp", 4, "", "fits, less memory per GPU"),
    ("001", "seed001-llama7b-fsdp-batch8", 4, "", "fits"),
    ("001", "seed001-llama13b-zero3-offload", 4, "", "fits (optimizer in host memory)"),
    ("003", "seed003-codellama7b-fsdp", 4, "", "fits"),
    ("003", "seed003-codellama7b-no-fsdp", 1, "", "does not fit one 80 GB GPU"),
    ("003", "seed003-codellama7b-grad-ckpt", 4, "", "fits"),
]
# The seed 002 A100 variants (tessera-catalogue --list), predicted on a 40 GiB A100.
A100 = {"seed002-baseline": "batch_size=32", "seed002-larger-model": "batch_size=16 accumulate_grad_batches=4",
        "seed002-even-larger": "batch_size=16 accumulate_grad_batches=4",
        "seed002-sgd": "batch_size=16 accumulate_grad_batches=4",
        "seed002-cpu-offload": "batch_size=16 accumulate_grad_batches=4"}


def predict(build, binary, ranks, args, memory):
    cmd = [f"{build}/catalogue/{binary}", "--dry-run", "device=cuda", f"device_memory={memory}", f"devices={ranks}"]
    cmd += args.split()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    verdict = next((l for l in out.stdout.splitlines() if l.startswith("[predict] FITS") or
                    l.startswith("[predict] DOES NOT FIT")), None)
    if out.returncode not in (0, 3) or verdict is None:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stdout[-1500:]}\n{out.stderr[-1500:]}")
    peak = re.search(r"^  peak ([0-9.]+) GiB", out.stdout, re.M).group(1)
    return peak, verdict[len("[predict] "):]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    lines = ["| seed | step | ranks | GPU | settings | predicted peak per rank (GiB) | prediction | the seed says |",
             "|---|---|---:|---|---|---:|---|---|"]
    for seed, binary, ranks, args, says in ROWS:
        peak, verdict = predict(a.build, binary, ranks, args, "80GiB")
        lines.append(f"| {seed} | {binary} | {ranks} | 80 GiB | defaults {args} | {peak} | {verdict} | {says} |")
        print(lines[-1], flush=True)
        if binary in A100:
            peak, verdict = predict(a.build, binary, ranks, A100[binary], "40GiB")
            lines.append(f"| {seed} | {binary} | {ranks} | 40 GiB | {A100[binary]} | {peak} | {verdict} | |")
            print(lines[-1], flush=True)
    if a.out:
        open(a.out, "w").write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
