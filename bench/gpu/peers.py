#!/usr/bin/env python3
"""The peers of bench/gpu/run.sh: one Llama training run on one device, as a user of each peer would write it.

usage: peers.py SIDE --config CONFIG.json --batch B --seq-len T [--steps S] [--warmup W] [--device cuda]
  SIDE  eager      Hugging Face LlamaForCausalLM (attn_implementation="sdpa") in bf16, torch.optim.AdamW(fused=True),
                   zero_grad(set_to_none=True): a plain PyTorch 2.11 eager loop
        lightning  the same module under a lightning.pytorch Trainer, precision="bf16-true", devices=1
        fsdp2      the same model with torch.distributed.fsdp.fully_shard on each decoder layer and the root, at world
                   size 1 (NCCL on CUDA, gloo on the CPU), bf16 parameters, fused AdamW
        compiled   the eager loop with its loss (the model's forward and the cross-entropy) under torch.compile
                   (--compile-mode, default "default"; fullgraph); the warm-up steps hold the compilation, whose time
                   is reported apart as "warmup_s"
  CONFIG  a Hugging Face Llama config.json (run.sh writes the one of tessera's preset with tessera's writer)

Every side trains on random tokens (torch.manual_seed(0)), reads the loss every step (as a progress bar does, which
synchronizes the device), and times steps W+1 .. W+S together: tokens/s = S * B * T / seconds. The last line is one
JSON object: {"side", "batch", "seq_len", "steps", "step_ms" (mean), "tokens_per_s", "peak_bytes"
(torch.cuda.max_memory_allocated over the whole run, as the labs print it), "reserved_bytes", "loss" (each step),
"flops_per_token", "oom" (true when the batch does not fit; then no timings)}.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F


def flops_per_token(cfg, seq_len):
    """tessera's count (LlamaConfig::training_flops_per_token): 6 per matmul weight, the head included, plus
    12 * layers * heads * head_dim * T for the attention scores and values (forward and backward, no causal halving)."""
    c, layers = cfg.hidden_size, cfg.num_hidden_layers
    h, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    q = getattr(cfg, "head_dim", None) or c // h
    per_layer = 2 * c * h * q + 2 * c * kv * q + 3 * c * cfg.intermediate_size
    return 6.0 * (layers * per_layer + c * cfg.vocab_size) + 12.0 * layers * h * q * seq_len


def build_model(args, device):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig.from_json_file(args.config)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.config.use_cache = False
    if device.startswith("cuda"):  # the fp32 construction above is not part of training's peak
        torch.cuda.reset_peak_memory_stats()
    return cfg, model


def loss_of(model, x):
    """Mean next-token cross-entropy in fp32 over every position, as tessera computes it."""
    logits = model(input_ids=x).logits
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))


def batches(cfg, args, device):
    g = torch.Generator(device="cpu").manual_seed(0)
    while True:
        yield torch.randint(0, cfg.vocab_size, (args.batch, args.seq_len), generator=g).to(device, non_blocking=True)


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def train_step(model, x, optimizer, loss_fn=None):
    """One step as an eager loop writes it; returns the loss, read (which synchronizes the device)."""
    loss = loss_fn(x) if loss_fn is not None else loss_of(model, x)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


def plain_loop(model, cfg, args, device, optimizer, loss_fn=None):
    """The warm-up and timed steps; args.warmup_s gets the warm-up steps' wall time."""
    losses, data = [], batches(cfg, args, device)
    sync(device)
    t0 = time.perf_counter()
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            sync(device)
            args.warmup_s = time.perf_counter() - t0
            t0 = time.perf_counter()
        losses.append(train_step(model, next(data), optimizer, loss_fn))
    sync(device)
    return losses, time.perf_counter() - t0


def run_eager(args, device):
    cfg, model = build_model(args, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=device.startswith("cuda"))
    result = plain_loop(model, cfg, args, device, opt)
    if args.profile:
        profile(model, cfg, args, device, opt)
    return cfg, result


def run_compiled(args, device):
    cfg, model = build_model(args, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=device.startswith("cuda"))
    loss_fn = torch.compile(lambda x: loss_of(model, x), mode=args.compile_mode, fullgraph=True)
    return cfg, plain_loop(model, cfg, args, device, opt, loss_fn)


def kernel_kind(name):
    """A CUDA kernel's kind by its name: gemm, attention, optimizer, memcpy/memset or elementwise/reduction/other."""
    name = name.lower()
    return ("gemm" if any(k in name for k in ("gemm", "cutlass", "sm90_xmma", "nvjet", "cublas")) else
            "attention" if any(k in name for k in ("flash", "fmha", "attention", "cudnn")) else
            "optimizer" if "adam" in name or "foreach" in name else
            "memcpy/memset" if "memcpy" in name or "memset" in name else "elementwise/reduction/other")


def profile(model, cfg, args, device, optimizer, steps=2):
    """torch.profiler over `steps` more steps: the device's kernel time by kind against the wall time, and the top
    kernels, written to args.profile."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile as prof
    data = batches(cfg, args, device)
    sync(device)
    with prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        t0 = time.perf_counter()
        for _ in range(steps):
            train_step(model, next(data), optimizer)
        sync(device)
        wall = time.perf_counter() - t0
    kinds = {}
    total = 0.0
    for e in p.key_averages():
        # Kernels only: an operator's row (aten::mm) repeats the device time of the kernels it launched.
        t = getattr(e, "self_device_time_total", 0) or 0
        if t <= 0 or e.device_type != DeviceType.CUDA:
            continue
        kind = kernel_kind(e.key)
        kinds[kind] = kinds.get(kind, 0.0) + t
        total += t
    with open(args.profile, "w") as f:
        f.write(f"eager loop, batch {args.batch}, seq {args.seq_len}, {steps} steps: wall {wall * 1e3:.1f} ms, "
                f"device kernels {total / 1e3:.1f} ms ({total / 1e3 / (wall * 1e3) * 100:.1f}% of wall)\n")
        total = max(total, 1e-9)
        for k, t in sorted(kinds.items(), key=lambda kv: -kv[1]):
            f.write(f"  {k:32s} {t / 1e3:9.1f} ms  {t / total * 100:5.1f}%\n")
        f.write("\n" + p.key_averages().table(sort_by="self_cuda_time_total", row_limit=30, max_name_column_width=90))


def run_fsdp2(args, device):
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", rank=0, world_size=1)
    try:
        cfg, model = build_model(args, device)
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=device.startswith("cuda"))
        return cfg, plain_loop(model, cfg, args, device, opt)
    finally:
        dist.destroy_process_group()


def run_lightning(args, device):
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback

    cfg = None

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            nonlocal cfg
            cfg, self.model = build_model(args, "cpu" if device == "cpu" else device)

        def training_step(self, x, _):
            loss = loss_of(self.model, x)
            self.log("loss", loss, prog_bar=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4, weight_decay=0.01, fused=device.startswith("cuda"))

    class Clock(Callback):
        def __init__(self):
            self.losses, self.t0, self.t1 = [], None, None

        def on_train_batch_start(self, trainer, module, batch, i):
            if i == args.warmup:
                sync(device)
                self.t0 = time.perf_counter()

        def on_train_batch_end(self, trainer, module, outputs, batch, i):
            self.losses.append(outputs["loss"].item())
            if i == args.warmup + args.steps - 1:
                sync(device)
                self.t1 = time.perf_counter()

    module = Module()
    data = batches(cfg, args, "cpu")
    rows = [next(data) for _ in range(args.warmup + args.steps)]
    loader = torch.utils.data.DataLoader(rows, batch_size=None)
    clock = Clock()
    trainer = pl.Trainer(accelerator="gpu" if device.startswith("cuda") else "cpu", devices=1,
                         precision="bf16-true", max_steps=args.warmup + args.steps, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[clock])
    trainer.fit(module, loader)
    return cfg, (clock.losses, clock.t1 - clock.t0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("side", choices=["eager", "lightning", "fsdp2", "compiled"])
    p.add_argument("--config", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", default="cuda")
    p.add_argument("--compile-mode", default="default", help="compiled: torch.compile's mode")
    p.add_argument("--profile", help="eager only: write a torch.profiler summary of 2 more steps to this file")
    args = p.parse_args()
    from transformers import LlamaConfig
    result = {"side": args.side, "batch": args.batch, "seq_len": args.seq_len, "steps": args.steps,
              "flops_per_token": flops_per_token(LlamaConfig.from_json_file(args.config), args.seq_len),
              "oom": False}
    try:
        _, (losses, seconds) = {"eager": run_eager, "lightning": run_lightning, "fsdp2": run_fsdp2,
                             "compiled": run_compiled}[args.side](
            args, args.device)
        result.update(step_ms=1000.0 * seconds / args.steps,
                      tokens_per_s=args.steps * args.batch * args.seq_len / seconds, loss=losses,
                      warmup_s=getattr(args, "warmup_s", None))
        if args.side == "compiled":
            result["compile_mode"] = args.compile_mode
    except torch.OutOfMemoryError as e:
        result.update(oom=True, error=str(e).splitlines()[0])
    if args.device.startswith("cuda"):
        result.update(peak_bytes=torch.cuda.max_memory_allocated(), reserved_bytes=torch.cuda.max_memory_reserved(),
                      device_name=torch.cuda.get_device_name())
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
