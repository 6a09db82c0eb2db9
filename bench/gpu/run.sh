#!/usr/bin/env bash
# bench/gpu/run.sh OUT
# Everything a GPU session runs, in one call of a GPU machine that has python3 with a CUDA torch (2.11+cu130), CMake
# and ninja but no package registry. Results go to OUT (at most 8 files): log.txt (the whole console),
# summary.md (the tables), profile_eager.txt, runs.tar.gz (every metrics file and peer result), nsys.txt (when nsys is there).
#
# It needs .bundle/ (git-ignored; carry it to the machine), made beforehand on a Debian 12 machine with a build:
#   bench/gpu/bundle.sh BUILD     Debian packages (scripts/offline-bundle.sh) + the binaries below, xz-compressed
# The binaries are the build machine's (the same torch 2.11+cu130 wheel, so the same LibTorch ABI); when they do not
# load here, run.sh configures and builds them itself against this machine's torch (slower by a few minutes).
#
# Steps, each under its own timeout, skipped once TESSERA_GPU_BUDGET_S (default 450) seconds have passed:
#   1. smoke: the tiny Llama, fp32, device=cuda (again with TESSERA_CUDA_KERNELS=load when it finds no CUDA kernels)
#   2. the measured bf16 GEMM rate (8192^3, median of 20) for MFU
#   3. performance: llama-1b (TinyLlama's shape), bf16, seq 2048, AdamW, at each batch of TESSERA_GPU_BATCHES
#      (default "16 24" on a GPU of 100 GB or more, else "8"): tessera (llama-bf16true, predicted against measured
#      peak), the same with each setting of TESSERA_GPU_VARIANTS, then bench/gpu/peers.py eager, compiled, lightning,
#      fsdp2 (same batch, steps and warm-up; the sides are TESSERA_GPU_PEERS); then torch.profiler
#      over two eager steps (profile_eager.txt)
#   4. correctness: bench/gpu/cases.sh cuda (every precision, checkpointing, Adam8bit, offload, LoRA/QLoRA, the
#      sharding policies at 2 and 4 ranks through the MPI communicator, OPT, T5, ViT, BLIP-2) against the CPU losses
#      committed in bench/gpu/refs_cpu.json; tessera_nccl_tests at one rank; tessera's CUDA paths (tessera_tests
#      "[cuda]": Adam8bit's kernel against its CPU loop, RoPE's against the op-by-op form, AdamW against its fused
#      kernel on the CPU)
#   seed002: seed 002's catalogue steps at full size (TESSERA_GPU_SEED002, binaries; random weights in the published
#      shapes, synthetic images and captions, TESSERA_GPU_SEED002_STEPS optimizer steps, default 3): tessera's binary
#      (measured peak, predicted peak, step time) beside bench/gpu/lab_blip2.py, the lab's Lightning script on the
#      same step's settings
#   5. seed 001's one-GPU step (catalogue/seed001-llama7b-1gpu: open-llama-7b, bf16-true, batch 4, seq 512) for
#      TESSERA_GPU_SEED001_STEPS (default 6) steps after one warm-up step, beside peers.py eager on the same shape
#      (bench/gpu/open-llama-7b.config.json) and settings (predicted against measured peak)
#   6. nsys profile of 5 tessera llama-1b steps, the top kernels (only when nsys is installed); ncu: every kernel of
#      a one-step tessera llama-1b run (initialization's kernels included, at most 6000 launches, within
#      TESSERA_GPU_NCU_S seconds, default 150) under Nsight Compute, by kind and name (bench/gpu/kernels.py; only when ncu is installed)
#
# TESSERA_GPU_SECTIONS picks sections (default all: "smoke seed002 gemm perf profile cases nccl seed001 nsys ncu"), e.g. a short
# call after a change: TESSERA_GPU_SECTIONS="perf cases" TESSERA_GPU_BATCHES=16 TESSERA_GPU_PEERS=eager
# TESSERA_GPU_CASES='^llama-' (an extended regular expression over case names).
set -uo pipefail
out=${1:-${OUT:?usage: run.sh OUT}}
sections=" ${TESSERA_GPU_SECTIONS:-smoke seed002 gemm perf profile cases nccl seed001 nsys ncu} "
want() { [[ "$sections" == *" $1 "* ]]; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
budget=${TESSERA_GPU_BUDGET_S:-450}
deadline=$(($(date +%s) + budget))
left() { echo $((deadline - $(date +%s))); }
exec > >(tee -a "$out/log.txt") 2>&1
runs=/tmp/tessera-gpu-runs
rm -rf "$runs" && mkdir -p "$runs"
summary=$out/summary.md
: >"$summary"
section() { echo; echo "=== $* ($(left) s left)"; }
# step NAME TIMEOUT CMD...: runs CMD under timeout unless too little time is left; logs its exit status.
step() {
  local name=$1 limit=$2; shift 2
  local l; l=$(left)
  if [ "$l" -lt 15 ]; then echo "[$name] skipped: out of time"; return 99; fi
  [ "$limit" -gt "$l" ] && limit=$l
  local t0; t0=$(date +%s)
  timeout "$limit" "$@"
  local rc=$?
  echo "[$name] rc=$rc in $(($(date +%s) - t0)) s"
  return $rc
}

section environment
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
python3 -c 'import torch, transformers, lightning; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__, "lightning", lightning.__version__, torch.cuda.get_device_name())'
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
# The carried binaries' RPATH names the build machine's environment (/work/main/.venv, Python 3.11): that path
# points at this machine's site-packages, whose torch wheel is the same build.
venv_site=/work/main/.venv/lib/python3.11/site-packages
if [ ! -e "$venv_site" ]; then mkdir -p "$(dirname "$venv_site")" && ln -s "$site" "$venv_site"; fi
mkdir -p /work/main/.venv/bin && ln -sf "$(command -v python3)" /work/main/.venv/bin/python
nvidia_libs=$(ls -d "$site"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH="$torch_lib:$nvidia_libs${LD_LIBRARY_PATH:-}"
# shellcheck disable=SC1091
source "$root/scripts/offline-activate.sh" "$root/.bundle/debs" /tmp/tessera-offline
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
bin=/tmp/tessera-bin
rm -rf "$bin" && mkdir -p "$bin" && tar xJf "$root/.bundle/bin.tar.xz" -C "$bin"
export LD_LIBRARY_PATH="$bin/lib:$LD_LIBRARY_PATH"  # Arrow C++ and Parquet (bundle.sh)
missing=$(ldd "$bin/examples/llama-fp32" "$bin/tests/tessera_tests" 2>&1 | grep 'not found' | sort -u)
if [ -n "$missing" ] || ! "$bin/examples/llama-fp32" --help >/dev/null 2>&1; then
  echo "carried binaries do not load here:"; echo "$missing"
  section "build here"
  targets=$(tar tJf "$root/.bundle/bin.tar.xz" | xargs -n1 basename | tr '\n' ' ')
  cmake -S "$root" -B /tmp/tessera-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_TORCH_PYTHON="$(command -v python3)" \
    -DTESSERA_BUILD_BENCH=OFF >"$runs/configure.log" 2>&1 || tail -30 "$runs/configure.log"
  # shellcheck disable=SC2086
  step build 400 cmake --build /tmp/tessera-build -j 16 --target $targets >"$runs/build.log" 2>&1 || tail -40 "$runs/build.log"
  bin=/tmp/tessera-build
fi
gib() { python3 -c "print(f'{$1 / 2**30:.2f}')"; }

if want smoke; then
section "1. smoke"
step smoke 60 "$bin/examples/llama-fp32" model=tiny max_steps=2 device=cuda predict=false >"$runs/smoke.log" 2>&1
tail -4 "$runs/smoke.log"
if grep -q 'CUDA' "$runs/smoke.log" && ! grep -q '^\[done\]' "$runs/smoke.log"; then
  # LibTorch's CUDA kernels are loaded where libcuda.so.1 loads (core/cuda_kernels.hpp); ask for them outright.
  echo "smoke: again with TESSERA_CUDA_KERNELS=load"
  export TESSERA_CUDA_KERNELS=load
  step smoke-load 60 "$bin/examples/llama-fp32" model=tiny max_steps=2 device=cuda predict=false 2>&1 | tail -4
fi
fi

if want gemm; then
section "2. GEMM rate"
step gemm 60 python3 - <<'EOF' | tee "$runs/gemm.json"
import json, torch
a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(2))
for _ in range(3): a @ b
times = []
for _ in range(20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); a @ b; e.record(); torch.cuda.synchronize(); times.append(s.elapsed_time(e) / 1e3)
t = sorted(times)[len(times) // 2]
print(json.dumps({"bf16_gemm_tflops": 2 * 8192**3 / t / 1e12, "device": torch.cuda.get_device_name()}))
EOF
fi

mem_gb=$(python3 -c 'import torch; print(torch.cuda.get_device_properties(0).total_memory // 2**30)')
batches=${TESSERA_GPU_BATCHES:-$([ "$mem_gb" -ge 100 ] && echo "16 24" || echo "8")}
steps=10 warmup=3
if want perf; then
section "3. performance: llama-1b, bf16, seq 2048"
for batch in $batches; do
  echo "batch $batch, $steps timed steps after $warmup warm-up steps"
  step "tessera-1b-b$batch" 120 "$bin/examples/llama-bf16true" model=llama-1b seq_len=2048 batch_size="$batch" \
    max_steps=$((steps + warmup)) lr=1e-4 device=cuda metrics="$runs/tessera-1b-b$batch.jsonl" >"$runs/tessera-1b-b$batch.log" 2>&1
  grep -v '^  [a-z_]* *|' "$runs/tessera-1b-b$batch.log" | grep -v '^  step [0-9]* micro' | tail -8
  # The same run with other settings, each a row of the table: TESSERA_GPU_VARIANTS, ';'-separated (e.g.
  # "loss_blocks=off;loss_blocks=on").
  IFS=';' read -ra variants <<<"${TESSERA_GPU_VARIANTS:-}"
  for v in "${variants[@]}"; do
    [ -n "$v" ] || continue
    tag=tessera-1b-b$batch-$(echo "$v" | tr -c 'a-z0-9\n' '-')
    echo "$v" >"$runs/$tag.variant"
    # shellcheck disable=SC2086
    step "$tag" 120 "$bin/examples/llama-bf16true" model=llama-1b seq_len=2048 batch_size="$batch" \
      max_steps=$((steps + warmup)) lr=1e-4 device=cuda $v metrics="$runs/$tag.jsonl" >"$runs/$tag.log" 2>&1
    grep -E '^\[(done|predict)\]' "$runs/$tag.log"
  done
  for side in ${TESSERA_GPU_PEERS:-eager compiled lightning fsdp2}; do
    step "$side-1b-b$batch" 240 python3 "$root/bench/gpu/peers.py" "$side" --config "$root/bench/gpu/llama-1b.config.json" \
      --batch "$batch" --seq-len 2048 --steps "$steps" --warmup "$warmup" >"$runs/$side-1b-b$batch.out" 2>&1 ||
      tail -8 "$runs/$side-1b-b$batch.out"
    grep '^{' "$runs/$side-1b-b$batch.out" | tail -1 | tee "$runs/$side-1b-b$batch.json" | cut -c1-300
  done
done
python3 "$root/bench/gpu/summary.py" perf "$runs" "$warmup" $batches | tee -a "$summary"
fi
first=${batches%% *}
if want profile; then
# Where the eager loop's step goes (torch.profiler, 2 steps after the timed ones): kernel time by kind against the
# wall time. tessera runs the same LibTorch kernels, so this says what is left to fuse.
step profile-eager 90 python3 "$root/bench/gpu/peers.py" eager --config "$root/bench/gpu/llama-1b.config.json" \
  --batch "$first" --seq-len 2048 --steps 3 --warmup 2 --profile "$out/profile_eager.txt" >"$runs/profile-eager.out" 2>&1 ||
  tail -8 "$runs/profile-eager.out"
head -40 "$out/profile_eager.txt" 2>/dev/null | cut -c1-220
fi

if want cases; then
section "4. correctness on CUDA"
reserve=10  # seconds kept for the sections after the cases
want nccl && reserve=$((reserve + 10))
want seed001 && reserve=$((reserve + 60))
want seed002 && reserve=$((reserve + 150))
TESSERA_CASES="${TESSERA_GPU_CASES:-}" step cases 200 "$root/bench/gpu/cases.sh" cuda "$bin/examples" "$runs/cases" "$((deadline - reserve))"
echo >>"$summary"; echo "## CUDA losses against CPU (bench/gpu/cases.sh)" >>"$summary"
TESSERA_CASES="${TESSERA_GPU_CASES:-}" python3 "$root/bench/gpu/losses.py" compare "$root/bench/gpu/refs_cpu.json" "$runs/cases" | tee -a "$summary"
fi
if want nccl; then
step nccl 60 mpirun -np 1 "$bin/tests/tessera_nccl_tests" </dev/null 2>&1 | tail -4
echo "- tessera_nccl_tests (NcclCommunicator, one rank): rc=${PIPESTATUS[0]}" >>"$summary"
step cuda-tests 60 "$bin/tests/tessera_tests" "[cuda]" 2>&1 | tail -6
echo "- tessera_tests [cuda] (tessera's CUDA paths: Adam8bit's and RoPE's kernels, AdamW's fused kernel): rc=${PIPESTATUS[0]}" >>"$summary"
fi

if want seed002; then
section "seed 002 at full size: tessera against the lab's Lightning script"
seed_steps=${TESSERA_GPU_SEED002_STEPS:-3}
rows=${TESSERA_GPU_SEED002:-seed002-bf16-true seed002-sgd seed002-larger-model seed002-bf16-mixed seed002-lora}
for b in $rows; do
  step "$b" 150 "$bin/catalogue/$b" max_steps="$seed_steps" device=cuda metrics="$runs/$b.jsonl" \
    >"$runs/$b.log" 2>&1 || tail -6 "$runs/$b.log"
  grep -E '^(step [0-9]+/|\[done\]|\[predict\])' "$runs/$b.log" | tail -5
  step "lab-$b" 180 python3 "$root/bench/gpu/lab_blip2.py" "$b" --build "$bin" --steps "$seed_steps" \
    >"$runs/lab-$b.out" 2>&1 || tail -6 "$runs/lab-$b.out"
  grep '^{' "$runs/lab-$b.out" | tail -1 | tee "$runs/lab-$b.json" | cut -c1-400
done
# shellcheck disable=SC2086
python3 "$root/bench/gpu/summary.py" seed002 "$runs" $rows | tee -a "$summary"
fi

if want seed001; then
section "5. seed 001: open-llama-7b on one GPU (seed001-llama7b-1gpu: bf16-true, batch 4, seq 512) against the eager HF loop"
s1_steps=${TESSERA_GPU_SEED001_STEPS:-6}
step seed001-7b 150 "$bin/catalogue/seed001-llama7b-1gpu" max_steps="$((s1_steps + 1))" device=cuda \
  metrics="$runs/seed001-7b.jsonl" >"$runs/seed001-7b.log" 2>&1
grep -v '^  [a-z_]* *|' "$runs/seed001-7b.log" | tail -12
step eager-7b 150 python3 "$root/bench/gpu/peers.py" eager --config "$root/bench/gpu/open-llama-7b.config.json" \
  --batch 4 --seq-len 512 --steps "$s1_steps" --warmup 1 >"$runs/eager-7b.out" 2>&1 || tail -8 "$runs/eager-7b.out"
grep '^{' "$runs/eager-7b.out" | tail -1 | tee "$runs/eager-7b.json" | cut -c1-300
python3 "$root/bench/gpu/summary.py" pair "$runs/seed001-7b.jsonl" "$runs/eager-7b.json" 1 \
  "seed 001 open-llama-7b (seed001-llama7b-1gpu), bf16-true, batch 4, seq 512, one GPU: tessera against the eager HF loop" | tee -a "$summary"
python3 "$root/bench/gpu/summary.py" run "$runs/seed001-7b.jsonl" "tessera seed001-llama7b-1gpu: memory by phase" | tee -a "$summary"
fi

section "6. profile"
if want nsys && command -v nsys >/dev/null 2>&1; then
  step nsys 90 nsys profile -o /tmp/tessera-1b -f true --stats=false "$bin/examples/llama-bf16true" model=llama-1b \
    seq_len=2048 batch_size="$first" max_steps=5 lr=1e-4 device=cuda predict=false >/dev/null 2>&1
  step nsys-stats 60 nsys stats -r cuda_gpu_kern_sum,cuda_api_sum -f csv -o /tmp/tessera-1b-stats /tmp/tessera-1b.nsys-rep >/dev/null 2>&1
  head -c 400000 /tmp/tessera-1b-stats_cuda_gpu_kern_sum.csv >"$out/nsys_kernels.csv" 2>/dev/null
  head -c 200000 /tmp/tessera-1b-stats_cuda_api_sum.csv >"$out/nsys_api.csv" 2>/dev/null
  head -15 "$out/nsys_kernels.csv" | cut -c1-200
else
  echo "no nsys on this machine"
fi
# Nsight Compute (on the machine when nsys is not): every kernel of a 2-step tessera llama-1b run, timed one at a time
# (gpu__time_duration, one pass per kernel), summed by kind and name by bench/gpu/kernels.py.
if want ncu && command -v ncu >/dev/null 2>&1; then
  step ncu "${TESSERA_GPU_NCU_S:-150}" ncu --csv --metrics gpu__time_duration.sum --launch-count 6000 \
    --log-file /tmp/tessera-ncu.csv "$bin/examples/llama-bf16true" model=llama-1b seq_len=2048 batch_size="$first" \
    max_steps=1 lr=1e-4 device=cuda predict=false >/dev/null 2>&1
  python3 "$root/bench/gpu/kernels.py" /tmp/tessera-ncu.csv 30 | tee "$out/ncu_kernels.md" | head -45
  { echo; echo "## tessera llama-1b, 2 steps, batch $first: kernels (Nsight Compute)"; echo; cat "$out/ncu_kernels.md"; } >>"$summary"
fi

tar czf "$out/runs.tar.gz" -C "$runs" . 2>/dev/null
section "summary"
cat "$summary"
