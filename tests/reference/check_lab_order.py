#!/usr/bin/env python3
"""tessera's lab row orders (data/lab_order.hpp) against the Python libraries themselves, row for row.

The references (lab_order_dump answers the same requests from tessera's side):
  numpy     numpy.random.default_rng(seed).permutation(n), for every seed in SEEDS and n in SMALL_N (n from 0 to
            4,097, at and around powers of two) plus two random n (< 5,000, < 70,000) per seed, and for n in LARGE_N
            (65,535 to 131,072) with the seeds in LARGE_SEEDS: 1,644 (seed, n) pairs. The seeds sit on both sides of
            2^31, 2^32, 2^53, 2^63 and 2^64 - 1, plus 24 random 64-bit ones.
  shuffle   datasets.Dataset.from_dict({"i": range(n)}).shuffle(seed=seed)["i"], for a few (seed, n).
  split     datasets.Dataset.train_test_split(test_size=..., seed=...)'s train and test rows (litgpt's Alpaca2k:
            n=2000, test_size=0.05, seed=42); where datasets raises ValueError, tessera must refuse too.
  randperm  torch.randperm(n, generator=torch.Generator().manual_seed(seed)).
  loader    torch.utils.data.DataLoader(ds, batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed),
            drop_last, num_workers=0): the rows of epochs 0..3, one fresh iterator per epoch, each run to its end;
            and dataloader_epoch_order for epoch 3 alone.
  dist      list(DistributedSampler(ds, num_replicas=W, rank=r, shuffle, seed, drop_last)) after set_epoch(epoch), for
            W = 1..4 and every rank; where torch raises (seed + epoch > 2^64 - 1) tessera must refuse too.

usage: check_lab_order.py LAB_ORDER_DUMP [--quick] [--perturb --expect-mismatch]
--quick checks a few cases of each kind. --perturb hands the comparison one wrong expected row (the first row of the
first non-trivial numpy permutation, plus one): a negative control, which must then see a mismatch. Exit 0 when
every check passes, 1 when one fails, 2 when lab_order_dump did not run. With --expect-mismatch exit 0 only when the
tool ran and the comparison failed.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tessera_run  # noqa: E402

U64 = 2**64 - 1
SEEDS = [0, 1, 2, 42, 1234, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**32 + 42, 2**53 + 1, 2**63 - 1, 2**63,
         U64 - 1, U64] + [random.Random(20240607 + k).getrandbits(64) for k in range(24)]
SMALL_N = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 256,
           257, 1000, 1023, 1024, 1025, 1900, 2000, 4095, 4096, 4097]
LARGE_N = [65535, 65536, 65537, 99999, 100000, 131071, 131072]
LARGE_SEEDS = [0, 1, 42, 2**31, 2**32 - 1, 2**32, 2**63, U64] + SEEDS[-4:]
SHUFFLE_CASES = [(0, 1), (42, 2), (42, 10), (42, 2000), (2**32, 1000), (U64, 4097), (SEEDS[-2], 65537),
                 (7, 100000)]
SPLIT_CASES = [(2000, 0.05, 42), (20, 0.05, 42), (10, 0.1, 0), (7, 0.5, 1), (100, 0.07, 3), (3, 0.34, 5),
               (1000, 0.333, U64), (4097, 0.25, 2**32), (2, 0.5, 9), (101, 0.999, 2**63),
               (1, 0.5, 0), (10, 0.0, 0), (10, 1.0, 0), (10, 1.5, 0), (10, -0.1, 0), (5, 0.9, 7)]
RANDPERM_SEEDS = [0, 1, 42, 2**31, 2**32 - 1, 2**32, 2**32 + 42, 2**63, U64]
RANDPERM_N = [0, 1, 2, 3, 10, 100, 1000, 1024, 65536, 100000]
LOADER_N = [1, 2, 5, 10, 100, 1900]
LOADER_BATCH = [1, 4, 8]
LOADER_SEEDS = [0, 42, 2**32 + 1]
EPOCHS = 4
DIST_N = [0, 1, 2, 3, 5, 7, 10, 100, 1001]
DIST_CASES = [(0, 0), (42, 1), (42, 3), (U64 - 3, 3), (U64, 1)]  # (seed, epoch); the last must be refused


def pick(items, quick, keep=3):
    return items[:keep] if quick else items


class Rows(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def loader_epochs(n, seed, batch, drop_last):
    loader = DataLoader(Rows(n), batch_size=batch, shuffle=True, generator=torch.Generator().manual_seed(seed),
                        drop_last=drop_last, num_workers=0, collate_fn=lambda b: b)
    return [[i for b in loader for i in b] for _ in range(EPOCHS)]


def dist_rows(n, w, rank, seed, epoch, shuffle, drop_last):
    sampler = DistributedSampler(list(range(n)), num_replicas=w, rank=rank, shuffle=shuffle, seed=seed,
                                 drop_last=drop_last)
    sampler.set_epoch(epoch)
    return list(sampler)


def refused(fn):
    """fn's rows, or None where the library raises."""
    try:
        return fn()
    except (ValueError, RuntimeError, OverflowError):
        return None


def build_cases(quick):
    """[(kind, request line, label, expected)]: expected is a list of rows, {"train", "test"}, a list of epochs, or
    None where the reference refuses."""
    cases = []
    for seed in pick(SEEDS, quick):
        for n in pick(SMALL_N, quick, 12):
            cases.append(("numpy", f"numpy {seed} {n}", f"seed={seed} n={n}",
                          np.random.default_rng(seed).permutation(n)))
    draw = random.Random(7)
    for seed in pick(SEEDS, quick, 0):
        for n in (draw.randrange(5000), draw.randrange(70000)):
            cases.append(("numpy", f"numpy {seed} {n}", f"seed={seed} n={n}",
                          np.random.default_rng(seed).permutation(n)))
    for seed in pick(LARGE_SEEDS, quick, 1):
        for n in pick(LARGE_N, quick, 1):
            cases.append(("numpy", f"numpy {seed} {n}", f"seed={seed} n={n}",
                          np.random.default_rng(seed).permutation(n)))
    from datasets import Dataset
    for seed, n in pick(SHUFFLE_CASES, quick, 2):
        rows = Dataset.from_dict({"i": list(range(n))}).shuffle(seed=seed)["i"]
        cases.append(("shuffle", f"numpy {seed} {n}", f"datasets shuffle seed={seed} n={n}", list(rows)))
    for n, test_size, seed in pick(SPLIT_CASES, quick, 2):
        def split(n=n, test_size=test_size, seed=seed):
            parts = Dataset.from_dict({"i": list(range(n))}).train_test_split(test_size=test_size, seed=seed)
            return {"train": list(parts["train"]["i"]), "test": list(parts["test"]["i"])}
        cases.append(("split", f"split {n} {test_size!r} {seed}", f"n={n} test_size={test_size!r} seed={seed}",
                      refused(split)))
    for seed in pick(RANDPERM_SEEDS, quick):
        for n in pick(RANDPERM_N, quick, 4):
            want = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
            cases.append(("randperm", f"randperm {n} {seed}", f"seed={seed} n={n}", want))
    for n in pick(LOADER_N, quick, 2):
        for batch in pick(LOADER_BATCH, quick, 2):
            for drop in (0, 1):
                for seed in pick(LOADER_SEEDS, quick, 1):
                    epochs = loader_epochs(n, seed, batch, bool(drop))
                    label = f"n={n} batch={batch} drop_last={drop} seed={seed}"
                    cases.append(("loader", f"loader {n} {seed} {batch} {drop} {EPOCHS}", label, epochs))
                    cases.append(("loader", f"loader_epoch {n} {seed} {EPOCHS - 1} {batch} {drop}",
                                  f"{label} epoch={EPOCHS - 1} alone", epochs[-1]))
    for n in pick(DIST_N, quick, 4):
        for seed, epoch in pick(DIST_CASES, quick, 2):
            for shuffle in (1, 0):
                for drop in (0, 1):
                    for w in range(1, 5):
                        for rank in range(w):
                            want = refused(lambda: dist_rows(n, w, rank, seed, epoch, bool(shuffle), bool(drop)))
                            cases.append(("dist", f"dist {n} {w} {rank} {seed} {epoch} {shuffle} {drop}",
                                          f"n={n} W={w} rank={rank} seed={seed} epoch={epoch} shuffle={shuffle} "
                                          f"drop_last={drop}", want))
    return cases


def same(got, want):
    if want is None:
        return "error" in got, "reference refuses it"
    if "error" in got:
        return False, "tessera refused it: " + got["error"]
    if isinstance(want, dict):
        return got.get("train") == want["train"] and got.get("test") == want["test"], f"reference {want}"
    if "epochs" in got:
        return got["epochs"] == want, f"reference {want}"
    want = np.asarray(want, dtype=np.int64)
    rows = np.asarray(got["rows"], dtype=np.int64)
    return rows.shape == want.shape and bool(np.array_equal(rows, want)), f"reference {want.tolist()[:12]}..."


def perturbed(cases):
    for i, (kind, line, label, want) in enumerate(cases):
        if kind == "numpy" and len(want) > 1:
            want = np.array(want)
            want[0] += 1
            cases[i] = (kind, line, label, want)
            return


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--expect-mismatch", action="store_true")
    a = ap.parse_args()

    start = time.time()
    cases = build_cases(a.quick)
    if a.perturb:
        perturbed(cases)
    ref_s = time.time() - start
    proc = subprocess.run([a.dump], input="\n".join(line for _, line, _, _ in cases) + "\n", capture_output=True,
                          text=True)
    if proc.returncode != 0:
        print(f"lab_order_dump failed ({proc.returncode}): {proc.stderr.strip()}")
        return 2
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    if len(answers) != len(cases):
        print(f"lab_order_dump answered {len(answers)} lines for {len(cases)} requests")
        return 2

    counts, mismatches = {}, []
    for (kind, line, label, want), got in zip(cases, answers):
        counts[kind] = counts.get(kind, 0) + 1
        ok, reference = same(got, want)
        if not ok:
            shown = got.get("error") or str(got.get("rows", got))[:80]
            mismatches.append(f"{kind} {label}: tessera {shown}; {reference}")
    rows = sum(len(g.get("rows", [])) + sum(map(len, g.get("epochs", []))) + len(g.get("train", [])) +
               len(g.get("test", [])) for g in answers)
    print("checked " + ", ".join(f"{k}: {v}" for k, v in counts.items()) + f" cases ({rows} rows) in "
          f"{time.time() - start:.1f} s (references {ref_s:.1f} s); {len(mismatches)} mismatches")
    for m in mismatches[:10]:
        print("  " + m)
    ok = not mismatches
    return tessera_run.verdict(ok, a.expect_mismatch)


if __name__ == "__main__":
    sys.exit(main())
