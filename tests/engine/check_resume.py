#!/usr/bin/env python3
"""Resumable training state (engine/train_state.hpp), end to end on a real binary.

  check_resume.py equal   BIN RANKS [key=value ...]
      A: STEPS steps with checkpoint_every=STEPS/2, save_dir=full.  B: resume from A's middle checkpoint.
      B's step losses, its save_dir files and its final checkpoint must equal A's bit for bit.
  check_resume.py reshard BIN RANKS NEW_RANKS [key=value ...]
      A: RANKS ranks with a checkpoint at STEPS/2.  B: NEW_RANKS ranks resume it and stop at once, writing the
      same step again: every tensor assembled from B's parts must equal A's bit for bit.  C: NEW_RANKS ranks
      resume it and train on (the same rows per step): losses within 1e-5 of A's (reduction order differs).

Environment: MPIEXEC (mpirun) for RANKS > 1.  Only the standard library: the safetensors files are parsed here.
"""
import json
import subprocess
import sys
from pathlib import Path

from runs import command, enter_work_dir, read_safetensors

STEPS = 6
# micro: the smallest Llama preset (two blocks, 156,480 parameters); every unit, shard and state tensor of tiny's
# kinds, so the bit-for-bit comparisons check the same files with a thirty-second of tiny's parameters.
BASE = ["model=micro", "seq_len=32", "predict=false", "log_every=1"]


def launch(binary, ranks, args, out):
    cmd = command(binary, ranks, BASE, args)
    with open(out, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=600).returncode
    text = Path(out).read_text()
    if rc != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {rc}:\n{text[-3000:]}")
    return text


def losses(metrics):
    return {r["step"]: r["loss"] for r in map(json.loads, Path(metrics).read_text().splitlines())
            if r.get("event") == "step"}


ELEMENT = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "U8": 1}


def assemble(ckpt):
    """Every tensor of a checkpoint in its own coordinates: parts joined, locals by shard position."""
    manifest = json.loads((Path(ckpt) / "manifest.json").read_text())
    whole, local = {}, {}
    for f in manifest["files"]:
        tensors, meta = read_safetensors(Path(ckpt) / f["name"])
        for name, (dtype, shape, raw) in tensors.items():
            kind = meta[name].split()
            if kind[0] == "local":
                local[(name, int(kind[1]))] = (dtype, raw)
                continue
            begin, numel = int(kind[1]), int(kind[2])
            size = ELEMENT[dtype]
            buf = whole.setdefault(name, [dtype, bytearray(numel * size), 0])
            buf[1][begin * size:begin * size + len(raw)] = raw
            buf[2] += len(raw) // size
    for name, (dtype, buf, covered) in whole.items():
        if covered != len(buf) // ELEMENT[dtype]:
            sys.exit(f"FAIL: {ckpt}: {name} has {covered} of {len(buf) // ELEMENT[dtype]} elements")
    return manifest, {k: (v[0], bytes(v[1])) for k, v in whole.items()}, local


def same_state(a, b, what, locals_too=True):
    ma, wa, la = assemble(a)
    mb, wb, lb = assemble(b)
    if set(wa) != set(wb):
        sys.exit(f"FAIL: {what}: tensors differ: {sorted(set(wa) ^ set(wb))[:5]}")
    bad = [k for k in wa if wa[k] != wb[k]]
    if locals_too:
        if set(la) != set(lb):
            sys.exit(f"FAIL: {what}: local tensors differ: {sorted(set(la) ^ set(lb))[:5]}")
        bad += [f"{k[0]}@{k[1]}" for k in la if la[k] != lb[k]]
    for key in ("step", "optimizer", "loss_scaler"):
        if ma[key] != mb[key]:
            bad.append(f"manifest {key}: {ma[key]} vs {mb[key]}")
    if bad:
        sys.exit(f"FAIL: {what}: {len(bad)} tensor(s) differ, e.g. {bad[:5]}")
    return len(wa) + (len(la) if locals_too else 0)


def rows_args(args, ranks, rows):
    """batch_size for `rows` rows per step over `ranks` ranks, unless the args set it."""
    if any(a.startswith("batch_size=") for a in args):
        return []
    return [f"batch_size={rows // ranks}"]


def main():
    mode, binary = sys.argv[1], sys.argv[2]
    enter_work_dir("resume-")
    if mode == "equal":
        ranks, extra = int(sys.argv[3]), sys.argv[4:]
        extra = extra + rows_args(extra, ranks, 2 * ranks)
        half = STEPS // 2
        launch(binary, ranks, extra + [f"max_steps={STEPS}", "checkpoint_dir=a", f"checkpoint_every={half}",
                                       "metrics=a.jsonl", "save_dir=full"], "a.txt")
        text = launch(binary, ranks, extra + [f"max_steps={STEPS}", "checkpoint_dir=b", f"resume=a/step-{half:08d}",
                                              "metrics=b.jsonl", "save_dir=resumed"], "b.txt")
        if f"resumed from a/step-{half:08d} at step {half}" not in text:
            sys.exit("FAIL: the resumed run does not say where it resumed:\n" + text[-2000:])
        la, lb = losses("a.jsonl"), losses("b.jsonl")
        if sorted(lb) != list(range(half, STEPS)):
            sys.exit(f"FAIL: the resumed run ran steps {sorted(lb)}, not {half}..{STEPS - 1}")
        diff = [(s, la[s], lb[s]) for s in lb if la[s] != lb[s]]
        if diff:
            sys.exit(f"FAIL: losses differ after resuming (step, uninterrupted, resumed): {diff}")
        files = sorted(p.name for p in Path("full").iterdir())
        for name in files:
            if (Path("full") / name).read_bytes() != (Path("resumed") / name).read_bytes():
                sys.exit(f"FAIL: save_dir file {name} differs between the uninterrupted and the resumed run")
        n = same_state(f"a/step-{STEPS:08d}", f"b/step-{STEPS:08d}", "final checkpoints")
        print(f"ok: {ranks} rank(s): steps {half}..{STEPS - 1} resumed bit for bit (losses {[lb[s] for s in sorted(lb)]}); "
              f"save_dir {files} identical; final checkpoints equal in {n} tensors")
    elif mode == "reshard":
        ranks, new_ranks, extra = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
        rows = 4 * max(ranks, new_ranks)
        half = STEPS // 2
        launch(binary, ranks, extra + rows_args(extra, ranks, rows) +
               [f"max_steps={STEPS}", "checkpoint_dir=a", f"checkpoint_every={half}", "metrics=a.jsonl"], "a.txt")
        new = extra + rows_args(extra, new_ranks, rows)
        launch(binary, new_ranks, new + [f"max_steps={half}", "checkpoint_dir=b", f"resume=a/step-{half:08d}"], "b.txt")
        n = same_state(f"a/step-{half:08d}", f"b/step-{half:08d}", f"{ranks} -> {new_ranks} ranks", locals_too=False)
        launch(binary, new_ranks, new + [f"max_steps={STEPS}", "checkpoint_dir=c", f"resume=a/step-{half:08d}",
                                         "metrics=c.jsonl"], "c.txt")
        la, lc = losses("a.jsonl"), losses("c.jsonl")
        worst = max(abs(la[s] - lc[s]) / abs(la[s]) for s in lc)
        if sorted(lc) != list(range(half, STEPS)) or worst > 1e-5:
            sys.exit(f"FAIL: resumed on {new_ranks} ranks: steps {sorted(lc)}, worst relative loss difference {worst:.2e}")
        print(f"ok: {ranks} -> {new_ranks} ranks: {n} tensors resharded bit for bit; steps {half}..{STEPS - 1} "
              f"within {worst:.1e} of the {ranks}-rank run")
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
