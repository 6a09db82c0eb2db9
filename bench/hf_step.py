#!/usr/bin/env python3
"""The PyTorch eager side of bench/step_vs_pytorch: Hugging Face transformers' LlamaForCausalLM (its default "sdpa"
attention) trained in PyTorch eager with one torch.optim.AdamW for the whole run, as its users run it.

usage: hf_step.py init --dir D --tokens N
       hf_step.py bench --dir D --rows R --seq-len T --threads N --steps S [--warmup W] [--precision P]

init: D holds a config.json (written by the bench with tessera's writer); adds random weights (torch.manual_seed(0),
transformers' own initialisation) with save_pretrained, and D/tokens.bin, N random tokens as raw uint16 (nanoGPT's
format), so that tessera (model_dir=D data=D/tokens.bin) and every peer train the same weights on the same rows;
prints {"dir": D, "tokens": N} as its last line (the bench reads every Python side's last JSON line).
bench: trains from D, reading the rows in tessera's order, in --precision P as Lightning's precision plugins run it:
32-true (default), bf16-true (the model and AdamW's state in bf16), bf16-mixed (fp32 weights and AdamW, the forward
under torch.autocast("cpu", torch.bfloat16), the loss in fp32); prints one JSON line
{"step_ms": [...], "loss": [...], "threads": n, "peak_bytes": b}: the wall time of each step after the warm-up steps
(the first step also creates AdamW's state, as tessera's does), the loss of every step (warm-up included; read after
the clock stops), torch.get_num_threads(), and (without --no-peak) the tensor peak of one more step: the highest sum of
the bytes of live CPU tensors (parameters, gradients, AdamW state, activations, temporaries) in torch.profiler's
memory timeline of that step, which counts what tessera's CPU allocator counts (tensor bytes, not the C allocator's cached pages).
"""
import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

transformers.utils.logging.disable_progress_bar()  # its bars would bury the bench's own lines on the terminal

LR, WEIGHT_DECAY = 1e-4, 0.01  # the bench's tessera side runs lr=1e-4 weight_decay=0.01 too


def read_tokens(path):
    return torch.from_numpy(np.fromfile(path, dtype=np.uint16).astype(np.int64))


def batch(tokens, step, rows, seq_len):
    """tessera's data order with one rank and no accumulation (docs/architecture.md, data order): step s reads chunk
    s mod C of rows*T+1 tokens; row r is inputs [start + r*T, +T) and the targets one token later."""
    chunk = rows * seq_len
    start = (step % ((tokens.numel() - 1) // chunk)) * chunk
    span = tokens[start:start + chunk + 1]
    return span[:-1].view(rows, seq_len), span[1:].view(rows, seq_len)


PRECISION = "32-true"  # bench --precision; loss_of and load_model follow it


def loss_of(model, x, y):
    """Mean next-token cross-entropy over every position, in fp32, as tessera computes it."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=PRECISION == "bf16-mixed"):
        logits = model(input_ids=x).logits
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))


def load_model(model_dir):
    dtype = torch.bfloat16 if PRECISION == "bf16-true" else torch.float32
    return LlamaForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa")


def init(a):
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig.from_pretrained(a.dir)).save_pretrained(a.dir)
    g = torch.Generator().manual_seed(0)
    vocab = json.load(open(os.path.join(a.dir, "config.json")))["vocab_size"]
    tokens = torch.randint(0, vocab, (a.tokens,), generator=g, dtype=torch.int32)
    tokens.numpy().astype(np.uint16).tofile(os.path.join(a.dir, "tokens.bin"))
    print(json.dumps({"dir": a.dir, "tokens": a.tokens}))


def bench(a):
    model = load_model(a.dir)
    model.train()
    tokens = read_tokens(os.path.join(a.dir, "tokens.bin"))
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    times, losses = [], []
    for s in range(a.warmup + a.steps):
        x, y = batch(tokens, s, a.rows, a.seq_len)
        t0 = time.perf_counter()
        loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    out = {"step_ms": [t * 1e3 for t in times[a.warmup:]], "loss": losses, "threads": torch.get_num_threads()}
    if not a.no_peak:
        out["peak_bytes"] = step_peak_bytes(model, opt, tokens, a.warmup + a.steps, a)
    print(json.dumps(out))


def step_peak_bytes(model, opt, tokens, s, a):
    """The highest total of live CPU tensor bytes during one training step, from the profiler's memory timeline."""
    import tempfile
    import warnings
    from torch.profiler import ProfilerActivity, profile
    x, y = batch(tokens, s, a.rows, a.seq_len)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # export_memory_timeline's deprecation notice (it still serves CPU tensors)
        path = os.path.join(d, "timeline.json")
        prof.export_memory_timeline(path, device="cpu")
        _, sizes = json.load(open(path))
    return int(max(sum(per_category) for per_category in sizes))


def parse(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["init", "bench"])
    ap.add_argument("--dir", required=True, help="model dir (config.json, model.safetensors, tokens.bin)")
    ap.add_argument("--precision", choices=["32-true", "bf16-true", "bf16-mixed"], default="32-true")
    ap.add_argument("--no-peak", action="store_true", help="bench: leave out the profiled step and peak_bytes")
    for k, d in [("--tokens", 0), ("--rows", 8), ("--seq-len", 256), ("--steps", 5), ("--warmup", 1),
                 ("--threads", 0)]:
        ap.add_argument(k, type=int, default=d)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads or os.cpu_count())
    global PRECISION
    PRECISION = a.precision
    return a


def main():
    a = parse()
    if a.cmd == "init":
        init(a)
    else:
        bench(a)


if __name__ == "__main__":
    main()
