#!/bin/sh
# The size of a real loop: compile mklkit's bcd loops (solve_ws, eval_loss, block_scores
# and what they call; explicit signatures, so importing compiles them) in a fresh process
# with an empty cache, 3 times, then once with the warm cache.  Uses the code before
# this design (the checkout at $BASE).  Prints one line per run: seconds, load average.
PY=${PY:-python}
BASE=${BASE:-.}
for i in 1 2 3 warm; do
  [ $i = warm ] || rm -rf /tmp/proto_real_cache
  la=$(cut -d' ' -f1 /proc/loadavg)
  PYTHONPATH=$BASE NUMBA_CACHE_DIR=/tmp/proto_real_cache $PY -c "
import time; t = time.perf_counter()
import mklkit._jit.bcd
print('$i', round(time.perf_counter() - t, 1), 's, load $la')"
done
