#!/bin/sh
# Per-epoch time and call overhead, the candidates interleaved (3 rounds) so that the
# load of the shared machine drifts alike for all; warm caches of bench.py.
# Appends JSON lines to $OUT (default benchmarks/component_forms/results_epoch.jsonl).
cd "$(dirname "$0")/../.."
PY=${PY:-python}
for round in 1 2 3; do
  for c in a b c d ds; do
    for mode in bench overhead; do
      if [ $mode = bench ]; then m="benchmarks.component_forms.fit $c bench"; else m="benchmarks.component_forms.overhead $c"; fi
      PYTHONPATH=$PWD NUMBA_CACHE_DIR=/tmp/proto_cache/${c}_0 $PY -m $m | tail -1 \
        | sed "s/^{/{\"round\": $round, \"what\": \"$mode\", /" >> "${OUT:-benchmarks/component_forms/results_epoch.jsonl}"
    done
  done
done
