"""``python -m benchmarks.component_forms.cache_check``: which way of giving a kernel to compiled code does
numba's cache reuse in a new process?  Runs each case twice on one empty
``NUMBA_CACHE_DIR`` and counts, in the second process, the entries loaded and saved
(``NUMBA_DEBUG_CACHE``)."""

import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = {
    "kernel in a class body": "K.Logistic.deriv(y, z, p)",
    "jitted closure from a factory": "K.logistic_deriv_closure(y, z, p)",
    "kernel as a dispatcher argument": "K.map_kernel(K.logistic_deriv_scalar, y, z, p)",
}
for label, call in CASES.items():
    code = (
        "import numpy as np\nfrom benchmarks.component_forms.cachecases import kernels as K\n"
        "y = np.ones(4); z = np.arange(4.0); p = np.empty(0)\n" + call + "\n"
    )
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=cache, NUMBA_DEBUG_CACHE="1")
        for run in (1, 2):
            out = subprocess.run(
                [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
            ).stdout
        loaded = out.count("data loaded")
        saved = out.count("data saved")
        print(
            f"{label}: second process loaded {loaded}, saved {saved} -> {'cached' if saved == 0 else 'compiled again'}"
        )
