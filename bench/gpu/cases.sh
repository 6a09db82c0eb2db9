#!/usr/bin/env bash
# bench/gpu/cases.sh DEVICE BIN OUTDIR [DEADLINE_S]
# Runs every case of bench/gpu/cases.txt with device=DEVICE (cpu or cuda), the example binaries from BIN, writing
# OUTDIR/NAME.jsonl (the metrics file) and OUTDIR/NAME.log (the console) for each. A case's global batch is 4 rows
# of 64 tokens: batch_size = 4 / ranks. With DEADLINE_S (seconds since the epoch), cases not started by then are
# skipped. TESSERA_CASES, an extended regular expression, keeps the cases whose names match it. Exit status: the
# number of cases that failed to run (capped at 100). On the CPU the 16-bit cases run with cpu_lowp=widen: each
# product in fp32 on the 16-bit values, rounded once, as a GPU's 16-bit GEMMs do; LibTorch's own 16-bit CPU
# kernels round differently on each instruction set (see cases.txt).
set -uo pipefail
device=${1:?usage: cases.sh DEVICE BIN OUTDIR [DEADLINE_S]}
bin=${2:?usage: cases.sh DEVICE BIN OUTDIR [DEADLINE_S]}
out=${3:?usage: cases.sh DEVICE BIN OUTDIR [DEADLINE_S]}
deadline=${4:-0}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failed=0
while read -r name ranks _tolerance binary extra; do
  case "$name" in ''|'#'*) continue ;; esac
  [ -n "${TESSERA_CASES:-}" ] && ! [[ "$name" =~ $TESSERA_CASES ]] && continue
  if [ "$deadline" -gt 0 ] && [ "$(date +%s)" -ge "$deadline" ]; then
    echo "cases: $name skipped (out of time)"; continue
  fi
  lr=lr=5e-3  # unless the case gives its own
  case " $extra " in *" lr="*) lr= ;; esac
  lowp=  # the CPU's 16-bit products: the same rounding on every CPU kind
  [ "$device" = cpu ] && lowp=cpu_lowp=widen
  args=(model=tiny max_steps=4 $lr seq_len=64 batch_size=$((4 / ranks)) predict=false device="$device" $lowp
        metrics="$out/$name.jsonl" $extra)
  rm -f "$out/$name.jsonl"
  t0=$(date +%s%N)
  if [ "$ranks" -gt 1 ]; then
    timeout 120 mpirun --oversubscribe -np "$ranks" "$bin/$binary" "${args[@]}" </dev/null >"$out/$name.log" 2>&1
  else
    timeout 120 "$bin/$binary" "${args[@]}" </dev/null >"$out/$name.log" 2>&1
  fi
  rc=$?
  printf 'cases: %-34s rc=%d %d ms\n' "$name" "$rc" $((($(date +%s%N) - t0) / 1000000))
  if [ "$rc" -ne 0 ]; then failed=$((failed + 1)); tail -5 "$out/$name.log" | sed 's/^/    /'; fi
done <"$here/cases.txt"
exit $((failed > 100 ? 100 : failed))
