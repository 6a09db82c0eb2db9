#!/usr/bin/env python3
"""Trains one Hugging Face model directory (Llama or OPT) on the same tokens with a tessera example binary and with
Hugging Face transformers (LlamaForCausalLM or OPTForCausalLM, "sdpa" attention) under torch.optim, then compares
per-step losses and the final weights. The model directory is written by transformers' own save_pretrained
(optionally in bf16, with tied embeddings, or sharded with an index), and tessera's saved directory is read back by
from_pretrained: both directions of the file format are exercised by the library users would otherwise run.

usage: check_against_transformers.py EXE --config JSON [--dtype F32|BF16] [--shard-size 200KB] [--llmc]
                                     [--accumulate A] [--rows R] [--optimizer adamw|adamw-fused|sgd] [--steps N]
                                     [--tol 1e-4] [--gradients]
Exit 0 when every loss agrees within --tol and every saved tensor within --weight-tol (relative, in norm), 1 otherwise,
2 when tessera did not run. With --expect-mismatch (negative controls) exit 0 only when tessera ran and the comparison
failed.

--config holds config.json keys; its "model_type" ("llama", the default, or "opt") picks the family, and EXE must be
a binary of that family. OPT's "dropout" defaults to 0 here, not OPTConfig's 0.1: tessera trains without dropout.
A directory tessera saved is loaded by AutoModelForCausalLM, which must make the family's class of it (the saved
config.json names the model_type).

--gradients (EXE is an Sgd binary) checks one step's loss and gradients directly instead. tessera has no gradient
dump, and needs none: one SGD step at lr=1 without weight decay leaves W1 = W0 - g, so tessera's gradient is
W0 - W1, read from the directory it saved. Two chained runs: the save_pretrained dir -> tessera's save S1, then S1
-> S2. For each, transformers' from_pretrained of the run's input dir (the second time: a directory tessera wrote)
must give tessera's step-0 loss within --tol and, from one backward over the step's micro-batches, tessera's
gradient within --tol per tensor (max |difference| / max |transformers' gradient|), after allowing each element the
one fp32 rounding that storing W0 - g made (one ulp of the weight). OPT's k_proj.bias has a gradient that is zero in
exact arithmetic (one shift of every key adds a constant to each query's scores, which softmax ignores), so both
sides hold rounding noise of ~1e-11 there: make_model_dir's perturbed biases put that under the ulp allowance, while
a wrong gradient of any real size still shows.
"""
import argparse
import json
import os
import struct
import sys
import tempfile

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, OPTConfig, OPTForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tessera_run  # noqa: E402

# model_type -> (config class, model class) of the families tessera implements (models/llama.hpp, models/opt.hpp).
FAMILIES = {"llama": (LlamaConfig, LlamaForCausalLM), "opt": (OPTConfig, OPTForCausalLM)}


def family(cfg):
    """The (config class, model class) of cfg's "model_type" (default "llama"); SystemExit naming the choices."""
    model_type = cfg.get("model_type", "llama")
    if model_type not in FAMILIES:
        raise SystemExit(f"ERROR: --config model_type {model_type!r} is not one of {sorted(FAMILIES)}")
    return FAMILIES[model_type]


def config_fields(cfg):
    """cfg without "model_type", with the defaults tessera trains under: OPT without dropout."""
    fields = {k: v for k, v in cfg.items() if k != "model_type"}
    if cfg.get("model_type") == "opt":
        fields.setdefault("dropout", 0.0)
    return fields


def make_model_dir(path, cfg, dtype, seed, shard_size):
    """A random model of cfg's family written by transformers. Norm scales are perturbed away from 1, and biases
    (OPT's; Llama has none) away from HF's zeros, so that a loader that mixes them up cannot pass."""
    config_class, model_class = family(cfg)
    torch.manual_seed(seed)
    model = model_class(config_class(**config_fields(cfg)))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith(".bias"):
                p.add_(0.1 * torch.randn_like(p))
    model.to(dtype).save_pretrained(path, max_shard_size=shard_size or "5GB")


def load(cfg, path, **kwargs):
    """transformers' model of the directory at path in fp32. A directory tessera saved goes through
    AutoModelForCausalLM, so its config.json must name cfg's family; ValueError otherwise."""
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **kwargs)
    want = family(cfg)[1]
    if type(model) is not want:
        raise ValueError(f"{path}/config.json makes a {type(model).__name__}, expected {want.__name__}")
    return model


def write_tokens(path, count, vocab, llmc, seed=0, planted=None):
    """count random tokens below vocab (with llm.c's header when llmc); planted, when given, at every 50th position
    as well (OPT's padding_idx, whose embedding row gets no gradient from the lookup, is 1 of 50272 ids at random)."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (count,), generator=g, dtype=torch.int32).to(torch.int16)
    if planted is not None:
        tokens[::50] = planted
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


def check_gradients(a, cfg, d, model_dir, token_file, tokens):
    """The --gradients mode (see the module docstring). Returns the exit code."""
    worst_loss, worst_grad, worst_raw, ok = 0.0, 0.0, 0.0, True
    src = model_dir
    for run in range(2):
        metrics, saved = os.path.join(d, f"metrics{run}.jsonl"), os.path.join(d, f"saved{run}")
        args = dict(model_dir=src, data=token_file, batch_size=a.rows, seq_len=a.seq_len,
                    accumulate_grad_batches=a.accumulate, max_steps=1, lr=1, weight_decay=0, threads=1,
                    device="cpu", metrics=metrics, save_dir=saved)
        ours = tessera_run.run(a.exe, args, a.tessera_extra)
        if ours is None:
            return 2
        model = load(cfg, src, attn_implementation="sdpa")
        total = 0.0
        for m in range(a.accumulate):
            x, y = tessera_run.batch(tokens, 0, m, a.accumulate, a.rows, a.seq_len)
            loss = hf_loss(model, x, y)
            (loss / a.accumulate).backward()
            total += loss.item()
        theirs = total / a.accumulate
        rel = abs(ours[0] - theirs) / abs(theirs)
        worst_loss = max(worst_loss, rel)
        print(f"run {run} ({'save_pretrained' if run == 0 else 'tessera-saved'} dir): loss tessera {ours[0]:.7f} "
              f"transformers {theirs:.7f} rel {rel:.2e}")
        after = dict(load(cfg, saved).named_parameters())
        names = [n for n, _ in model.named_parameters()]
        if set(after) != set(names):
            print(f"FAIL: tessera's save holds {sorted(set(after) ^ set(names))} differently from transformers")
            ok = False
        for name, p in model.named_parameters():
            if name not in after:
                continue
            w0, w1 = p.detach(), after[name].detach()
            mine, g = w0.double() - w1.double(), p.grad.double()
            # W1 is W0 - g rounded to fp32: up to one unit in the last place of the larger weight. Norm scales near
            # 1 have an ulp of 1.2e-7, which is 1e-4 of a 1e-3 gradient, so that rounding is allowed for per element.
            big = torch.maximum(w0.abs(), w1.abs())
            ulp = (torch.nextafter(big, torch.full_like(big, float("inf"))) - big).double()
            scale = g.abs().max().item()
            diff = (((mine - g).abs() - ulp).clamp(min=0).max().item() / scale) if scale > 0 else float("inf")
            worst_raw = max(worst_raw, (mine - g).abs().max().item() / scale if scale > 0 else float("inf"))
            worst_grad = max(worst_grad, diff)
            if diff > a.tol:
                print(f"  {name}: gradient differs by {diff:.2e}")
        src = saved
    print(f"gradients: 2 runs, worst loss difference {worst_loss:.2e}, worst gradient difference {worst_grad:.2e} "
          f"beyond one ulp of the weight (tolerance {a.tol:g}; {worst_raw:.2e} before that allowance)")
    ok = ok and worst_loss <= a.tol and worst_grad <= a.tol
    print("PASS" if ok else "FAIL")
    if a.expect_mismatch:
        print("negative control: " + ("mismatch seen, as expected" if not ok else "NO mismatch: the check is blind"))
        return 0 if not ok else 1
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("--config", required=True,
                    help='JSON text of config.json fields; "model_type": "llama" (default) or "opt" picks the family')
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
    ap.add_argument("--gradients", action="store_true",
                    help="check one step's loss and gradients (EXE: an Sgd binary) instead of a training run")
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
        pad = cfg.get("pad_token_id", 1) if cfg.get("model_type") == "opt" else None
        tokens = write_tokens(token_file, count, cfg["vocab_size"], a.llmc, planted=pad)
        if a.gradients:
            return check_gradients(a, cfg, d, model_dir, token_file, tokens)
        metrics, saved = os.path.join(d, "metrics.jsonl"), os.path.join(d, "saved")
        args = dict(model_dir=model_dir, data=token_file, batch_size=a.rows, seq_len=a.seq_len,
                    accumulate_grad_batches=a.accumulate, max_steps=a.steps, lr=a.lr, weight_decay=wd, threads=1,
                    device="cpu", metrics=metrics, save_dir=saved)
        ours = tessera_run.run(a.exe, args, a.tessera_extra)
        if ours is None:
            return 2
        theirs_model = load(cfg, model_dir, attn_implementation="sdpa")
        start = {n: p.detach().clone() for n, p in theirs_model.named_parameters()}
        theirs = train(theirs_model, tokens, a.steps, a.accumulate, a.rows, a.seq_len, a.lr, wd, a.optimizer)
        worst = tessera_run.compare_losses(ours, theirs)
        # tessera's saved directory, read by transformers.
        trained = dict(load(cfg, saved).named_parameters())
        # Each tensor's relative difference in norm, ||mine - theirs|| / ||theirs||: AdamW steps an element whose
        # gradient is rounding noise (a rare token's embedding row, a ReLU unit within rounding of its kink) by up to
        # lr either way, on either side, so the element-wise maximum measures that noise and the norm the training.
        # The element-wise maximum (relative to the tensor's largest entry) is printed beside it.
        worst_w, worst_name, worst_e, moved = 0.0, "", 0.0, 0.0
        for name, t in theirs_model.named_parameters():
            mine, ref = trained[name].detach().double(), t.detach().double()
            rel = ((mine - ref).norm() / ref.norm()).item()
            worst_e = max(worst_e, ((mine - ref).abs().max() / ref.abs().max()).item())
            worst_w, worst_name = max((worst_w, worst_name), (rel, name))
            moved = max(moved, (mine - start[name].double()).abs().max().item())
        weight_tol = a.weight_tol if a.weight_tol is not None else a.tol
        print(f"losses: {len(ours)} steps, worst relative difference {worst:.2e} (tolerance {a.tol:g}); "
              f"final weights: worst relative difference in norm {worst_w:.2e} ({worst_name}; tolerance "
              f"{weight_tol:g}), element-wise {worst_e:.2e}")
        ok = len(ours) == a.steps and worst <= a.tol and worst_w <= weight_tol and moved > 0
        ok = ok and set(trained) == set(n for n, _ in theirs_model.named_parameters())
        print("PASS" if ok else "FAIL")
        if a.expect_mismatch:  # a negative control: it must have run and disagreed
            print("negative control: " + ("mismatch seen, as expected" if not ok else "NO mismatch: the check is blind"))
            return 0 if not ok else 1
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
