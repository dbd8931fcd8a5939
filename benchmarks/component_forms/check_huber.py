"""``python -m benchmarks.component_forms.check_huber``: the Huber loss in the proposed form computes the same
bits as ``mklkit_huber.Huber`` (every kernel, random points inside and outside the
conjugate's domain), its record goes into a loop compiled once for every loss, and its
``cvxpy_expr`` agrees with the kernels."""

import numpy as np

from mklkit_huber.losses import Huber as Old
from benchmarks.component_forms.component import LOSS_FNS_T, sum_value
from benchmarks.component_forms.huber_new import Huber as New

rng = np.random.default_rng(0)
for delta in (0.3, 1.0, 2.5):
    old, new = Old(delta=delta), New(delta=delta)
    assert np.array_equal(old.param_vector, new.param_vector)
    p = new.param_vector
    y = rng.normal(size=200)
    z = y + rng.normal(scale=2.0, size=200)
    u = rng.uniform(-1.5 * delta, 1.5 * delta, size=200)
    ut = np.empty((200, 0))
    for k in ("value", "deriv", "deriv2"):
        assert np.array_equal(getattr(old.jit, k)(y, z, p), getattr(New, k)(y, z, p)), k
    for k in ("conj", "conj_grad", "conj_hess"):
        assert np.array_equal(getattr(old.jit, k)(y, u, p), getattr(New, k)(y, u, p)), k
    for k in ("conj_lower", "conj_upper"):
        assert np.array_equal(getattr(old.jit, k)(y, p), getattr(New, k)(y, p)), k
    for k in ("l0", "l0_grad", "l0_hess", "cons", "cons_grad", "cons_hess"):
        assert np.array_equal(getattr(old.constrained, k)(y, u, ut, p), getattr(New, k)(y, u, ut, p)), k
    rec = new.compiled()
    acc = 0.0
    for v in old.jit.value(y, z, p):  # numba's np.sum adds in order (numpy's pairwise)
        acc += v
    assert sum_value(rec, y, z) == acc
    assert new.constrained_compiled() is not None
    try:
        import cvxpy as cp

        zv = cp.Variable(200)
        zv.value = z
        assert abs(new.cvxpy_expr(y, zv).value - np.sum(old.jit.value(y, z, p))) < 1e-9 * 200
    except ImportError:
        pass
print("huber_new: every kernel equal bit for bit; record type", LOSS_FNS_T.name[:40], "...")
