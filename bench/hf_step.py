#!/usr/bin/env python3
"""The PyTorch side of bench/step_vs_pytorch: Hugging Face transformers' LlamaForCausalLM (its default "sdpa"
attention) trained in PyTorch eager with one torch.optim.AdamW for the whole run, as its users run it.

usage: hf_step.py bench --config JSON --rows R --seq-len T --threads N --steps S [--warmup W]
Prints one JSON line {"step_ms": [...]}: the wall time of each step after the warm-up steps (the first step
also creates AdamW's state, as tessera's first step does).
"""
import argparse
import json
import os
import time

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["bench"])
    ap.add_argument("--config", required=True)
    for k, t, d in [("--rows", int, 8), ("--seq-len", int, 256), ("--steps", int, 5), ("--warmup", int, 1),
                    ("--threads", int, 0)]:
        ap.add_argument(k, type=t, default=d)
    a = ap.parse_args()
    torch.set_num_threads(a.threads or os.cpu_count())
    torch.manual_seed(0)
    cfg = json.loads(a.config)
    model = LlamaForCausalLM(LlamaConfig(**cfg, attn_implementation="sdpa"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    tokens = torch.randint(0, cfg["vocab_size"], (a.rows * a.seq_len * (a.steps + a.warmup) + 1,))
    times = []
    for s in range(a.warmup + a.steps):
        start = s * a.rows * a.seq_len
        span = tokens[start:start + a.rows * a.seq_len + 1]
        x, y = span[:-1].view(a.rows, a.seq_len), span[1:].view(a.rows, a.seq_len)
        t0 = time.perf_counter()
        logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    print(json.dumps({"step_ms": [t * 1e3 for t in times[a.warmup:]]}))


if __name__ == "__main__":
    main()
