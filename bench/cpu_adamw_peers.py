#!/usr/bin/env python3
"""The Python side of bench/cpu_adamw: one AdamW step over the same ~100M fp32 parameters (the same Llama-like
shapes) with PyTorch 2.11's torch.optim.AdamW(fused=True) on the CPU and with DeepSpeed's DeepSpeedCPUAdam
(adamw_mode=True, the ZeRO-Offload optimizer), each over its own parameters, gradients and state, one optimizer
per peer for the whole run.

usage: cpu_adamw_peers.py --threads N [--warmup W] (--serve | --steps S)
Both modes first build the two optimizers and take W warm-up steps each (the first allocates and first-touches
the moments), then:
  --serve: print one JSON line of facts (below), then, for each line read from stdin, "torch_fused" or "deepspeed",
    time one opt.step() of that peer and print {"ms": t}; "quit" or the end of stdin ends. bench/cpu_adamw drives
    this, interleaving these steps with its own. A failure prints {"error": "..."}.
  --steps S: alternate S timed steps of each peer and print one JSON line of the facts with "torch_fused_ms" and
    "deepspeed_ms", the lists of times (ms).
The facts: "threads" (torch.get_num_threads()), "torch_cpu_capability" (the instruction set of ATen's kernels:
torch.backends.cpu.get_cpu_capability(), which follows ATEN_CPU_CAPABILITY), "deepspeed_isa" (the one DeepSpeed's op
was built for), "deepspeed_cxx_args" (its compiler flags) and "deepspeed_zmm_instructions" (how many instructions of
the built op use AVX-512's zmm registers, by objdump; -1 if it could not tell).

Emulating a narrower CPU: with TESSERA_CPU_ISA=avx2 (or scalar) on a CPU that has more, DeepSpeed's op is built as
on an AVX2-only CPU of the same microarchitecture: its JIT builder's flags (-march=native, and -D__AVX512__ from
py-cpuinfo) become -march=native -mno-avx512f -D__AVX256__ (scalar: -mno-avx, no SIMD define), in a build directory
of its own (TORCH_EXTENSIONS_DIR/deepspeed-avx2), so that the native and emulated builds do not replace each other.
ATen follows ATEN_CPU_CAPABILITY, which the caller sets (bench/cpu_adamw prints what each side ran with).
"""
import argparse
import json
import os
import subprocess
import sys
import time

ISAS = ("avx512", "avx2", "scalar")  # widest first, as tessera's TESSERA_CPU_ISA


def shapes():
    """bench/cpu_adamw's: 4 attention projections, 3 MLP matrices, 2 norms (100,147,200 parameters)."""
    return [(4096, 4096)] * 4 + [(2688, 4096)] * 3 + [(4096,)] * 2


def widest_isa():
    """The widest of ISAS this CPU has, from /proc/cpuinfo's flags (tessera's rule: avx512f; avx2 + fma + f16c)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    if "avx512f" in flags:
        return "avx512"
    if {"avx2", "fma", "f16c"} <= set(flags):
        return "avx2"
    return "scalar"


def deepspeed_build_for(isa):
    """Make DeepSpeed's CPU Adam op build for `isa` (below this CPU's widest) in a directory of its own."""
    import torch.utils.cpp_extension
    from deepspeed.ops.op_builder import CPUAdamBuilder

    # CPUOpBuilder.cxx_args() = [-O3, -g, -Wno-reorder, cpu_arch(), -fopenmp, simd_width()]; the -m flag after
    # -march=native turns off the wider sets and all that depend on them.
    simd, arch_off = {"avx2": ("-D__AVX256__", "-mno-avx512f"), "scalar": ("", "-mno-avx")}[isa]
    native_cxx_args = CPUAdamBuilder.cxx_args
    CPUAdamBuilder.simd_width = lambda self: simd
    CPUAdamBuilder.cxx_args = lambda self: native_cxx_args(self) + [arch_off]
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or torch.utils.cpp_extension.get_default_build_root()
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(root, f"deepspeed-{isa}")


def zmm_instructions(module):
    """How many instructions of the built extension `module` name a zmm register (-1: objdump failed)."""
    try:
        asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", module.__file__], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError, AttributeError):
        return -1
    return sum("%zmm" in line for line in asm.splitlines())


def main():
    ap = argparse.ArgumentParser()
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--serve", action="store_true")
    mode.add_argument("--steps", type=int)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    threads = a.threads or os.cpu_count()
    # DeepSpeed's kernel is an OpenMP loop in its own extension: the thread count must reach its OpenMP runtime too,
    # not only torch's, so it is set before either loads. Its first use JIT-builds the op with ninja from this
    # environment's bin/.
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    forced = os.environ.get("TESSERA_CPU_ISA") or None
    widest = widest_isa()
    if forced is not None and forced not in ISAS:
        sys.exit(f"TESSERA_CPU_ISA={forced}: use one of {', '.join(ISAS)}, or unset it for the widest")
    if forced is not None and ISAS.index(forced) < ISAS.index(widest):
        sys.exit(f"TESSERA_CPU_ISA={forced}: this CPU's widest set is {widest}")
    import torch
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    from deepspeed.ops.op_builder import CPUAdamBuilder

    deepspeed_isa = widest
    if forced is not None and forced != widest:
        deepspeed_build_for(forced)
        deepspeed_isa = forced

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
        "torch_fused": torch.optim.AdamW(params(), fused=True, **hyper),
        "deepspeed": DeepSpeedCPUAdam(params(), adamw_mode=True, **hyper),
    }
    for opt in peers.values():
        for _ in range(a.warmup):
            opt.step()
    facts = {
        "threads": torch.get_num_threads(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "deepspeed_isa": deepspeed_isa,
        "deepspeed_cxx_args": CPUAdamBuilder().cxx_args(),
        "deepspeed_zmm_instructions": zmm_instructions(peers["deepspeed"].ds_opt_adam),
    }

    def timed_step(name):
        t0 = time.perf_counter()
        peers[name].step()
        return (time.perf_counter() - t0) * 1e3

    if a.serve:
        print(json.dumps(facts), flush=True)
        while (name := sys.stdin.readline().strip()) not in ("quit", ""):
            try:
                print(json.dumps({"ms": timed_step(name)}), flush=True)
            except Exception as e:  # noqa: BLE001 -- reported to bench/cpu_adamw, which stops
                print(json.dumps({"error": f"{name}: {type(e).__name__}: {e}"}), flush=True)
        return
    times = {name: [] for name in peers}
    order = list(peers)
    for s in range(a.steps):
        for name in order if s % 2 == 0 else reversed(order):
            times[name].append(timed_step(name))
    print(json.dumps({**facts, "torch_fused_ms": times["torch_fused"], "deepspeed_ms": times["deepspeed"]}))


if __name__ == "__main__":
    main()
