#!/usr/bin/env bash
# rank_args.sh RANK "ARGS" COMMAND...: under mpirun, runs COMMAND with ARGS appended on rank RANK only (the others
# run COMMAND as given): a job whose ranks were started with other arguments, as a per-rank wrapper script does.
# RANK "sleep:S" instead of ARGS: rank RANK sleeps S seconds before it starts (a rank that never joins).
rank=$1 extra=$2
shift 2
me=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
if [ "$me" != "$rank" ]; then exec "$@"; fi
case "$extra" in
  sleep:*) sleep "${extra#sleep:}"; exec "$@" ;;
  *) exec "$@" $extra ;;
esac
