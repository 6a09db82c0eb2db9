#!/usr/bin/env python3
"""Trains the same Hugging Face Llama directory on the same tokens with a tessera example binary and with
llama_reference.py (independent PyTorch code), then compares per-step losses and the final weights.

usage: check_against_reference.py EXE --config JSON [--dtype F32|BF16] [--llmc] [--accumulate A] [--rows R]
                                  [--optimizer adamw|sgd] [--steps N] [--tol 1e-4]
Exit 0 when every loss and every saved tensor agrees within --tol (relative), 1 otherwise, 2 when tessera did not
run. With --expect-mismatch (negative controls) exit 0 only when tessera ran and the comparison failed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llama_reference as ref  # noqa: E402
import tessera_run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--config", required=True)
    ap.add_argument("--dtype", default="F32")
    ap.add_argument("--llmc", action="store_true")
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--tessera-extra", action="append", default=[],
                    help="key=value for tessera only, replacing the script's value for that key")
    ap.add_argument("--expect-mismatch", action="store_true",
                    help="negative control: exit 0 only if tessera ran and the comparison failed")
    a = ap.parse_args()
    wd = 0.01 if a.optimizer == "adamw" else 0.0
    cfg = json.loads(a.config)
    with tempfile.TemporaryDirectory() as d:
        model, tokens = os.path.join(d, "model"), os.path.join(d, "tokens.bin")
        py = [sys.executable, os.path.join(HERE, "llama_reference.py")]
        subprocess.run(py + ["make-model", model, "--config", a.config, "--dtype", a.dtype, "--seed", "7"], check=True)
        # About 2.5 epochs of data, so the run also crosses the wrap-around.
        count = int(a.rows * a.seq_len * a.accumulate * a.steps / 2.5) + 1
        subprocess.run(py + ["make-tokens", tokens, "--count", str(count), "--vocab", str(cfg["vocab_size"])]
                       + (["--llmc"] if a.llmc else []), check=True)
        metrics, saved = os.path.join(d, "metrics.jsonl"), os.path.join(d, "saved")
        args = dict(model_dir=model, data=tokens, batch_size=a.rows, seq_len=a.seq_len,
                    accumulate_grad_batches=a.accumulate, max_steps=a.steps, lr=a.lr, weight_decay=wd, threads=1,
                    device="cpu", metrics=metrics, save_dir=saved)
        ours = tessera_run.run(a.exe, args, a.tessera_extra)
        if ours is None:
            return 2
        torch.set_num_threads(1)
        cfg_ref, weights = ref.read_model_dir(model)
        reference = ref.Llama(cfg_ref, weights)
        theirs = ref.train(reference, ref.read_tokens(tokens), a.steps, a.accumulate, a.rows, a.seq_len, a.lr, wd,
                           a.optimizer)
        worst = tessera_run.compare_losses(ours, theirs)
        ok = len(ours) == a.steps and worst <= a.tol
        _, trained = ref.read_model_dir(saved)
        worst_w = 0.0
        for name, t in reference.params.items():
            mine = trained[name].double()
            worst_w = max(worst_w, ((mine - t.detach().double()).abs().max() / t.detach().abs().max()).item())
        print(f"losses: {len(ours)} steps, worst relative difference {worst:.2e}; "
              f"final weights: worst relative difference {worst_w:.2e} (tolerance {a.tol:g})")
        moved = max((trained[n].double() - weights[n].double()).abs().max().item() for n in trained)
        ok = ok and worst_w <= a.tol and moved > 0 and set(trained) == set(reference.params)
        print("PASS" if ok else "FAIL")
        if a.expect_mismatch:  # a negative control: it must have run and disagreed
            print("negative control: " + ("mismatch seen, as expected" if not ok else "NO mismatch: the check is blind"))
            return 0 if not ok else 1
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
