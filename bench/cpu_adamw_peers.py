#!/usr/bin/env python3
"""The Python side of bench/cpu_adamw: one AdamW step over the same ~100M fp32 parameters (the same Llama-like
shapes) with PyTorch 2.11's torch.optim.AdamW(fused=True) on the CPU and with DeepSpeed's DeepSpeedCPUAdam
(adamw_mode=True, the ZeRO-Offload optimizer), each over its own parameters, gradients and state, one optimizer
per peer for the whole run, alternating step by step so that both see the same machine state.

usage: cpu_adamw_peers.py --steps S --threads N [--warmup W]
Prints one JSON line {"torch_fused_ms": [...], "deepspeed_ms": [...], "threads": n}: the wall time (ms) of each
opt.step() after W warm-up steps (the first allocates and first-touches the moments), and torch.get_num_threads().
"""
import argparse
import json
import os
import sys
import time


def shapes():
    """bench/cpu_adamw's: 4 attention projections, 3 MLP matrices, 2 norms (100,147,200 parameters)."""
    return [(4096, 4096)] * 4 + [(2688, 4096)] * 3 + [(4096,)] * 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    threads = a.threads or os.cpu_count()
    # DeepSpeed's kernel is an OpenMP loop in its own extension: the thread count must reach its OpenMP runtime too,
    # not only torch's, so it is set before either loads. Its first use JIT-builds the op with ninja from this
    # environment's bin/.
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    import torch
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    hyper = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)  # bench/cpu_adamw's

    def params():
        ps = []
        for shape in shapes():
            p = torch.nn.Parameter(torch.randn(shape) * 0.02)
            p.grad = torch.randn(shape) * 1e-3
            ps.append(p)
        return ps

    peers = {
        "torch_fused_ms": torch.optim.AdamW(params(), fused=True, **hyper),
        "deepspeed_ms": DeepSpeedCPUAdam(params(), adamw_mode=True, **hyper),
    }
    for opt in peers.values():
        for _ in range(a.warmup):
            opt.step()
    times = {name: [] for name in peers}
    order = list(peers)
    for s in range(a.steps):
        for name in order if s % 2 == 0 else reversed(order):
            t0 = time.perf_counter()
            peers[name].step()
            times[name].append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({**times, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
