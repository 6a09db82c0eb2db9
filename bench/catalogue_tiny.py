#!/usr/bin/env python3
"""Every seed-catalogue entry on its tiny variant: the figures docs/seeds/ quotes.

Lists the entries with build/catalogue/tessera-catalogue, runs each binary with its tiny variant (the banner's
"tiny variant:" line) and max_steps=STEPS with a metrics file (entries of several ranks as a job of --ranks under
mpiexec), and prints one markdown table per seed: the largest params / grads / optimizer / acts figures over
step 1's phases and ranks (MiB; host memory under offload after "+"), the run's peak, the mean step time of steps
1.. (step 0 includes one-time allocation), the [done] line's train time and the last loss.

usage: catalogue_tiny.py BUILD_DIR [--steps 3] [--ranks 2] [--threads 1] [--out FILE] [--only SUBSTRING]
Only the standard library is needed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

MIB = 1024.0 * 1024.0
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def entries(catalogue):
    table = subprocess.run([catalogue], check=True, capture_output=True, text=True).stdout
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if len(cells) == 6 and cells[2].startswith("seed"):
            banner = subprocess.run([catalogue, cells[2]], check=True, capture_output=True, text=True).stdout
            tiny = [l.split("tiny variant:", 1)[1].split() for l in banner.splitlines() if "tiny variant:" in l][0]
            rows.append({"seed": cells[0], "step": cells[1], "binary": cells[2], "ranks": int(cells[3]),
                         "experiment": cells[4], "tiny": tiny})
    return rows


def run(build, e, a, workdir):
    metrics = os.path.join(workdir, e["binary"] + ".jsonl")
    ranks = a.ranks if e["ranks"] > 1 else 1
    cmd = [os.path.join(build, "catalogue", e["binary"])] + e["tiny"] + [
        f"max_steps={a.steps}", f"threads={a.threads}", f"metrics={metrics}", "log_every=1000"]
    if ranks > 1:
        cmd = ["mpiexec", "-n", str(ranks), "--oversubscribe"] + cmd
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, **MPI_ENV})
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"failed": f"exit {proc.returncode}: {last[:120]}", "ranks": ranks}
    records = [json.loads(line) for line in open(metrics)]
    mem = [r for r in records if r.get("event") == "memory" and r["step"] == 1]
    steps = [r for r in records if r.get("event") == "step"]
    done = [r for r in records if r.get("event") == "done"][0]
    top = lambda k: max(r.get(k, 0) for r in mem)
    times = [r["step_ms"] for r in steps[1:]] or [steps[0]["step_ms"]]
    return {"ranks": ranks, "params": top("params"), "params_cpu": top("params_cpu"), "grads": top("grads"),
            "grads_cpu": top("grads_cpu"), "optim": top("optim"), "optim_cpu": top("optim_cpu"), "acts": top("acts"),
            "peak": done["peak"], "step_ms": sum(times) / len(times), "train_s": done["train_s"],
            "loss": steps[-1]["loss"]}


def fmt(device, host):
    return f"{device / MIB:.2f}" + (f" +{host / MIB:.2f}" if host else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    rows = [e for e in entries(os.path.join(a.build, "catalogue", "tessera-catalogue")) if a.only in e["binary"]]
    out, seed = [], None
    with tempfile.TemporaryDirectory() as d:
        for e in rows:
            if e["seed"] != seed:
                seed = e["seed"]
                out += ["", f"### seed {seed}", "",
                        "| step | binary | tiny variant | ranks | params | grads | optim | acts | peak | step ms | train s | loss |",
                        "|---|---|---|---|---|---|---|---|---|---|---|---|"]
            r = run(a.build, e, a, d)
            head = f"| {e['step']} | `{e['binary']}` | `{' '.join(e['tiny'])}` | {r['ranks']} |"
            if "failed" in r:
                out.append(head + f" failed ({r['failed']}) | | | | | | | |")
            else:
                out.append(head + f" {fmt(r['params'], r['params_cpu'])} | {fmt(r['grads'], r['grads_cpu'])} | "
                           f"{fmt(r['optim'], r['optim_cpu'])} | {r['acts'] / MIB:.2f} | {r['peak'] / MIB:.2f} | "
                           f"{r['step_ms']:.0f} | {r['train_s']:.2f} | {r['loss']:.4f} |")
            print(out[-1], file=sys.stderr)
    text = (f"Tiny variants on the CPU, {a.steps} steps (max_steps={a.steps}), threads={a.threads} per rank; MiB at "
            "step 1, the largest over its phases and ranks (+ host memory under offload); peak = the run's allocator "
            "high-water mark (highest rank); step ms = mean of steps 1.." + "\n" + "\n".join(out) + "\n")
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
