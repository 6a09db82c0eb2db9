#!/usr/bin/env python3
"""PyTorch DDP or FSDP2 training-step time for the Llama that tessera trains: the PyTorch side of
bench/ddp_vs_pytorch.

bench/ddp_vs_pytorch times tessera's data-parallel (Ddp) and fully sharded (FullShard) training steps; this script
times the same step as PyTorch users run it, on the same machine, so that the C++ side can report the ratios:
--policy ddp wraps the model in torch.nn.parallel.DistributedDataParallel, --policy fsdp applies FSDP2's
torch.distributed.fsdp.fully_shard to every decoder layer and then to the root (torchtitan's composition) on a 1-D
"cpu" device mesh.

What it measures. It spawns --world processes (torch.multiprocessing, start method "spawn") that rendezvous over
tcp://127.0.0.1:<free port> with the gloo backend (CPU). Every rank sets torch.set_num_threads(--threads), builds
Hugging Face transformers' LlamaForCausalLM (attn_implementation "sdpa") in fp32 from the config with the same
--seed on every rank, wraps it, and trains it with torch.optim.AdamW (lr 1e-3, torch defaults otherwise) on
synthetic token batches of shape (--rows, --seq-len) per rank (deterministic, rank-dependent, drawn before timing
starts). One step is

    forward (mean next-token cross-entropy over every position, in fp32) -> loss.backward() (DDP all-reduces
    gradient buckets, overlapped; FSDP2 gathers each unit before its forward and backward and reduce-scatters its
    gradients) -> opt.step() -> opt.zero_grad(set_to_none=True)

Each step begins with dist.barrier(); rank 0's time.perf_counter() interval then covers the whole step. --warmup
steps are run but not reported. The loss printed is the mean over ranks of each rank's local loss, all-reduced
after the step's timer has stopped.

Output (stdout, rank 0 only): one JSON line per measured step, {"step": i, "step_ms": t, "loss": l} with i
counting measured steps from 0, then `pytorch_<policy>_median_ms: X`, the median of the measured step times (for an
even count the upper middle value, as bench/step_vs_pytorch takes it). On any failure (bad arguments, bad
config, a rank that raises or dies) a message goes to stderr and the exit status is non-zero.

    .venv/bin/python bench/ddp_reference.py --config '{"vocab_size": 4096, ...}' --policy ddp|fsdp --world 2 \\
        --rows 4 --seq-len 128 --threads 1 --steps 5 [--warmup 1] [--bucket-mb 25] [--seed 0]
--config takes the config.json fields as bench/ddp_vs_pytorch passes them (vocab_size, hidden_size,
intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, rms_norm_eps, rope_theta;
optionally head_dim, tie_word_embeddings, initializer_range).
"""
import argparse
import datetime
import json
import os
import sys
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import tessera_run  # noqa: E402  (its local_init_method, shared with the reference checks)

PROG = "ddp_reference"
REQUIRED_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")


class ConfigError(ValueError):
    pass


def check_config(cfg):
    """Reject configs the reference model cannot run, with a message naming the offending fields."""
    if not isinstance(cfg, dict):
        raise ConfigError("--config must be a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in cfg]
    if missing:
        raise ConfigError(f"config lacks {', '.join(missing)}")
    for k in REQUIRED_KEYS + ("num_key_value_heads", "head_dim"):
        v = cfg.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
            raise ConfigError(f"config {k} must be a positive integer, got {v!r}")
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    if not cfg.get("head_dim") and h % heads:
        raise ConfigError(f"hidden_size {h} is not divisible by num_attention_heads {heads} (and no head_dim given)")
    head_dim = cfg.get("head_dim") or h // heads
    if head_dim % 2:
        raise ConfigError(f"head_dim {head_dim} must be even for rotary embeddings")
    if heads % kv:
        raise ConfigError(f"num_attention_heads {heads} is not divisible by num_key_value_heads {kv}")


def build(cfg, a):
    """LlamaForCausalLM with the same random weights on every rank, wrapped as --policy says; returns
    (callable model, parameters)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(a.seed)
    model = LlamaForCausalLM(LlamaConfig(**cfg, attn_implementation="sdpa"))
    if a.policy == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb), list(model.parameters())
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (a.world,))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, list(model.parameters())


def next_token_loss(model, x, y):
    logits = model(input_ids=x).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))


def synthetic_batches(cfg, a, rank):
    """(tokens, targets) per step: deterministic in (seed, rank, step), uniform below vocab_size."""
    out = []
    for s in range(a.warmup + a.steps):
        g = torch.Generator().manual_seed(a.seed * 1_000_003 + rank * 10_007 + s + 1)
        span = torch.randint(0, cfg["vocab_size"], (a.rows, a.seq_len + 1), generator=g, dtype=torch.int64)
        out.append((span[:, :-1].contiguous(), span[:, 1:].contiguous()))
    return out


def median(values):
    v = sorted(values)
    return v[len(v) // 2]


def worker(rank, a, cfg, init_method):
    torch.set_num_threads(a.threads)
    check_config(cfg)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=a.world,
                            timeout=datetime.timedelta(seconds=a.timeout))
    try:
        model, params = build(cfg, a)
        opt = torch.optim.AdamW(params, lr=1e-3)
        batches = synthetic_batches(cfg, a, rank)
        records = []
        for s, (x, y) in enumerate(batches):
            dist.barrier()
            t0 = time.perf_counter()
            loss = next_token_loss(model, x, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            ms = (time.perf_counter() - t0) * 1e3
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss)
            if s >= a.warmup:
                records.append((ms, mean_loss.item() / a.world))
        if rank == 0:
            for i, (ms, l) in enumerate(records):
                print(json.dumps({"step": i, "step_ms": ms, "loss": l}))
            print(f"pytorch_{a.policy}_median_ms: {median([ms for ms, _ in records]):.3f}", flush=True)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def fail(msg, code=1):
    print(f"{PROG}: error: {msg}", file=sys.stderr, flush=True)
    return code


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="JSON text of config.json fields")
    ap.add_argument("--policy", choices=["ddp", "fsdp"], default="ddp",
                    help="DistributedDataParallel, or FSDP2 fully_shard per decoder layer and root (default ddp)")
    for k, t, d, h in [("--world", int, 2, "number of ranks (processes)"),
                       ("--rows", int, 4, "sequences per rank per step"),
                       ("--seq-len", int, 128, "tokens per sequence"),
                       ("--threads", int, 1, "torch intra-op threads per rank"),
                       ("--steps", int, 5, "measured steps"),
                       ("--warmup", int, 1, "unreported steps before the measured ones"),
                       ("--bucket-mb", float, 25.0, "DDP bucket_cap_mb"),
                       ("--seed", int, 0, "weight and data seed"),
                       ("--timeout", int, 300, "gloo rendezvous/collective timeout, seconds")]:
        ap.add_argument(k, type=t, default=d, help=f"{h} (default {d})")
    a = ap.parse_args(argv)

    for name in ("world", "rows", "seq_len", "threads", "steps", "timeout"):
        if getattr(a, name) < 1:
            return fail(f"--{name.replace('_', '-')} must be >= 1, got {getattr(a, name)}", 2)
    if a.warmup < 0 or a.bucket_mb <= 0:
        return fail("--warmup must be >= 0 and --bucket-mb > 0", 2)
    try:
        cfg = json.loads(a.config)
    except json.JSONDecodeError as e:
        return fail(f"--config is not valid JSON: {e}", 2)
    if not dist.is_available():
        return fail("this torch build has no torch.distributed")
    if not dist.is_gloo_available():
        return fail("this torch build has no gloo backend")

    rendezvous_dir = tempfile.TemporaryDirectory()
    try:
        mp.spawn(worker, args=(a, cfg, tessera_run.local_init_method(rendezvous_dir.name)), nprocs=a.world, join=True)
    except mp.ProcessRaisedException as e:
        # The message carries the failing rank's traceback; its last line is the exception itself.
        last = str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)
        print(str(e), file=sys.stderr)
        return fail(f"rank {e.error_index} failed: {last}")
    except mp.ProcessExitedException as e:
        return fail(f"rank {e.error_index} exited with code {e.exit_code} (signal {e.signal_name})"
                    if e.signal_name else f"rank {e.error_index} exited with code {e.exit_code}")
    except Exception as e:  # noqa: BLE001 - anything else from spawn/join
        traceback.print_exc()
        return fail(f"spawning {a.world} ranks failed: {e}")
    finally:
        rendezvous_dir.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
