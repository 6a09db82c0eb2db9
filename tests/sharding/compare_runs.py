#!/usr/bin/env python3
"""compare_runs.py A_METRICS A_SAVED B_METRICS B_SAVED TOL [--ranks W]

Passes when two tessera runs agree: every step's loss within TOL relative, and every saved tensor within TOL
relative (Frobenius norm of the difference over the norm of B's). With --ranks W, A's metrics file must also
hold memory records from each of ranks 0..W-1. The saved directories (model.safetensors, or every file a
model.safetensors.index.json names) are read from the safetensors format's definition (tests/engine/runs.py's
read_safetensors) into numpy, not with tessera's own reader, and without importing torch (about 2.5 CPU-seconds a
process, and the suite runs this a dozen times).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine"))
from runs import read_safetensors  # noqa: E402

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
          "U8": np.uint8, "BF16": np.uint16}


def load_file(path):
    """{name: float64 array} of one safetensors file; bf16 widened exactly (its bits are fp32's upper half)."""
    out = {}
    for name, (dtype, shape, raw) in read_safetensors(path)[0].items():
        values = np.frombuffer(raw, dtype=DTYPES[dtype])
        if dtype == "BF16":
            values = (values.astype(np.uint32) << 16).view(np.float32)
        out[name] = values.astype(np.float64).reshape(shape)
    return out


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_model_dir(d):
    """{name: tensor} of a Hugging Face directory: its single model.safetensors or the shards of its index."""
    single = os.path.join(d, "model.safetensors")
    if os.path.exists(single):
        return load_file(single)
    with open(os.path.join(d, "model.safetensors.index.json")) as f:
        index = json.load(f)
    tensors = {}
    for shard in sorted(set(index["weight_map"].values())):
        tensors.update(load_file(os.path.join(d, shard)))
    return tensors


def main():
    args = sys.argv[1:]
    ranks = None
    if "--ranks" in args:
        i = args.index("--ranks")
        ranks = int(args[i + 1])
        del args[i:i + 2]
    a_metrics, a_dir, b_metrics, b_dir, tol = args[0], args[1], args[2], args[3], float(args[4])
    fail = []
    a, b = records(a_metrics), records(b_metrics)
    la = [r["loss"] for r in a if r["event"] == "step"]
    lb = [r["loss"] for r in b if r["event"] == "step"]
    if len(la) != len(lb) or not la:
        fail.append(f"step counts differ: {len(la)} vs {len(lb)}")
    for s, (x, y) in enumerate(zip(la, lb)):
        rel = abs(x - y) / abs(y)
        print(f"step {s}: loss {x:.8f} vs {y:.8f} (rel {rel:.2e})")
        if rel > tol:
            fail.append(f"step {s} loss differs by {rel:.2e}")
    ta, tb = read_model_dir(a_dir), read_model_dir(b_dir)
    if sorted(ta) != sorted(tb):
        fail.append("the saved directories hold different tensor names")
    worst = 0.0
    for name in sorted(set(ta) & set(tb)):
        x, y = ta[name], tb[name]
        if x.shape != y.shape:
            fail.append(f"{name} has shape {x.shape} in A and {y.shape} in B")
            continue
        rel = float(np.linalg.norm(x - y) / max(float(np.linalg.norm(y)), 1e-300))
        worst = max(worst, rel)
        if rel > tol:
            fail.append(f"{name} differs by {rel:.2e}")
    print(f"worst tensor difference {worst:.2e} over {len(ta)} tensors")
    if ranks is not None:
        seen = sorted({r["rank"] for r in a if r["event"] == "memory"})
        print(f"memory records from ranks {seen}")
        if seen != list(range(ranks)):
            fail.append(f"memory records from ranks {seen}, expected 0..{ranks - 1}")
    for f in fail:
        print("FAIL:", f)
    print("PASS" if not fail else "FAILED")
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
