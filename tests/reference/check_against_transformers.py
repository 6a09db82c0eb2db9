#!/usr/bin/env python3
"""Trains one Hugging Face Llama directory on the same tokens with a tessera example binary and with Hugging Face
transformers (LlamaForCausalLM, its default "sdpa" attention) under torch.optim, then compares per-step losses and
the final weights. The model directory is written by transformers' own save_pretrained (optionally in bf16, with
tied embeddings, or sharded with an index), and tessera's saved directory is read back by from_pretrained: both
directions of the file format are exercised by the library users would otherwise run.

usage: check_against_transformers.py EXE --config JSON [--dtype F32|BF16] [--shard-size 200KB] [--llmc]
                                     [--accumulate A] [--rows R] [--optimizer adamw|adamw-fused|sgd] [--steps N]
                                     [--tol 1e-4]
Exit 0 when every loss agrees within --tol and every saved tensor within --weight-tol (relative), 1 otherwise, 2 when tessera did not
run. With --expect-mismatch (negative controls) exit 0 only when tessera ran and the comparison failed.
"""
import argparse
import json
import os
import struct
import sys
import tempfile

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tessera_run  # noqa: E402


def make_model_dir(path, cfg, dtype, seed, shard_size):
    """A random Llama written by transformers. Norm scales are perturbed away from 1 so that a loader that mixes
    them up cannot pass."""
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**cfg))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.1 * torch.randn_like(p))
    model.to(dtype).save_pretrained(path, max_shard_size=shard_size or "5GB")


def write_tokens(path, count, vocab, llmc, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (count,), generator=g, dtype=torch.int32).to(torch.int16)
    with open(path, "wb") as f:
        if llmc:
            f.write(struct.pack("<256i", 20240520, 1, count, *([0] * 253)))
        f.write(tokens.numpy().tobytes())
    return tokens.to(torch.int64) & 0xFFFF


def hf_loss(model, x, y):
    """Mean next-token cross-entropy over every position, the next token of a row's last position included (the
    targets come shifted from the token stream; LlamaForCausalLM's own labels= would drop that position)."""
    logits = model(input_ids=x).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))


def train(model, tokens, steps, accumulate, rows, seq_len, lr, weight_decay, optimizer):
    params = [p for p in model.parameters() if p.requires_grad]
    opt = {"adamw": lambda: torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay),
           "adamw-fused": lambda: torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True),
           "sgd": lambda: torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)}[optimizer]()
    return tessera_run.train_loop(lambda x, y: hf_loss(model, x, y), opt, tokens, steps, accumulate, rows, seq_len)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--config", required=True, help="JSON text of LlamaConfig fields")
    ap.add_argument("--dtype", default="F32", choices=["F32", "BF16"], help="dtype save_pretrained writes")
    ap.add_argument("--shard-size", help="save_pretrained's max_shard_size (small: a sharded dir with an index)")
    ap.add_argument("--llmc", action="store_true")
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "adamw-fused", "sgd"],
                    help="the torch.optim side; adamw-fused is AdamW(fused=True), the fused kernel torch users pick")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--weight-tol", type=float, help="tolerance for the final weights (default: --tol)")
    ap.add_argument("--tessera-extra", action="append", default=[],
                    help="key=value for tessera only, replacing the script's value for that key")
    ap.add_argument("--expect-mismatch", action="store_true",
                    help="negative control: exit 0 only if tessera ran and the comparison failed")
    a = ap.parse_args()
    wd = 0.0 if a.optimizer == "sgd" else 0.01
    cfg = json.loads(a.config)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        model_dir, token_file = os.path.join(d, "model"), os.path.join(d, "tokens.bin")
        make_model_dir(model_dir, cfg, torch.bfloat16 if a.dtype == "BF16" else torch.float32, 7, a.shard_size)
        if a.shard_size and not os.path.exists(os.path.join(model_dir, "model.safetensors.index.json")):
            print(f"ERROR: --shard-size {a.shard_size} did not make save_pretrained shard the model")
            return 1
        # About 2.5 epochs of data, so the run also crosses the wrap-around.
        count = int(a.rows * a.seq_len * a.accumulate * a.steps / 2.5) + 1
        tokens = write_tokens(token_file, count, cfg["vocab_size"], a.llmc)
        metrics, saved = os.path.join(d, "metrics.jsonl"), os.path.join(d, "saved")
        args = dict(model_dir=model_dir, data=token_file, batch_size=a.rows, seq_len=a.seq_len,
                    accumulate_grad_batches=a.accumulate, max_steps=a.steps, lr=a.lr, weight_decay=wd, threads=1,
                    device="cpu", metrics=metrics, save_dir=saved)
        ours = tessera_run.run(a.exe, args, a.tessera_extra)
        if ours is None:
            return 2
        theirs_model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
        start = {n: p.detach().clone() for n, p in theirs_model.named_parameters()}
        theirs = train(theirs_model, tokens, a.steps, a.accumulate, a.rows, a.seq_len, a.lr, wd, a.optimizer)
        worst = tessera_run.compare_losses(ours, theirs)
        # tessera's saved directory, read by transformers.
        trained = dict(LlamaForCausalLM.from_pretrained(saved, dtype=torch.float32).named_parameters())
        worst_w, moved = 0.0, 0.0
        for name, t in theirs_model.named_parameters():
            mine = trained[name].detach().double()
            worst_w = max(worst_w, ((mine - t.detach().double()).abs().max() / t.detach().abs().max()).item())
            moved = max(moved, (mine - start[name].double()).abs().max().item())
        weight_tol = a.weight_tol if a.weight_tol is not None else a.tol
        print(f"losses: {len(ours)} steps, worst relative difference {worst:.2e} (tolerance {a.tol:g}); "
              f"final weights: worst relative difference {worst_w:.2e} (tolerance {weight_tol:g})")
        ok = len(ours) == a.steps and worst <= a.tol and worst_w <= weight_tol and moved > 0
        ok = ok and set(trained) == set(n for n, _ in theirs_model.named_parameters())
        print("PASS" if ok else "FAIL")
        if a.expect_mismatch:  # a negative control: it must have run and disagreed
            print("negative control: " + ("mismatch seen, as expected" if not ok else "NO mismatch: the check is blind"))
            return 0 if not ok else 1
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
