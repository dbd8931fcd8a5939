"""The iterative SpicyMKL method on rank-one (feature-wise linear) kernels.

A bank of one linear kernel per feature plus a few Gaussians, logistic loss,
block 1-norm and a small C: many samples end up far from the margin, where
the logistic conjugate's curvature :math:`1/(t(1-t))` of their dual
coordinate :math:`t \\to 0` grows past :math:`10^{30}`, while the rank-one
kernels leave the Newton matrix of the other samples at the scale of
:math:`\\gamma K`.  The Newton direction must stay a Newton direction on
every coordinate whatever the spread of the diagonal (the ridge that keeps
the factorization safe is relative to each coordinate's own diagonal entry).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import scipy.linalg

from mklkit.components.losses import Logistic
from mklkit.components.elasticnet import L1
from mklkit.engines.spicy import Spicy
from mklkit.engines.spicy.inner import LM_FACTOR, levenberg_marquardt_direction
from mklkit.problem import Problem
from mklkit.result import Status
from mklkit.testing.engines import sample_points

try:
    from tests.conic_reference import solve_reference
    from tests.engines.certificates import assert_certified
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from conic_reference import solve_reference
    from engines.certificates import assert_certified

N, C, TOL = 80, 1e-3, 1e-6


def _rbf(X: np.ndarray, width: float) -> np.ndarray:
    sq = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    return np.exp(-sq / (2.0 * width * width))


@functools.lru_cache(maxsize=None)
def wdbc_rank_one(offset: float = 0.0, n: int = N) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows of wdbc (breast cancer), standardized: one linear kernel per feature
    (rank one; with ``offset`` 1, a degree-1 polynomial kernel, rank two) and three
    Gaussians on all features, each of unit trace."""
    X, y = sample_points("wdbc", n, 0)
    d = X.shape[1]
    Ks = [np.outer(X[:, j], X[:, j]) + offset for j in range(d)]
    Ks += [_rbf(X, w * math.sqrt(d)) for w in (0.5, 1.0, 2.0)]
    K = np.array([k / np.trace(k) for k in Ks])
    return np.ascontiguousarray(0.5 * (K + K.transpose(0, 2, 1))), y


def test_newton_direction_is_newton_on_every_coordinate_of_a_wide_diagonal():
    # the Newton matrix of an inner problem: a loss diagonal from 4 to 1e40 (samples
    # with t ~ 1e-40) plus gamma K of rank-one kernels on the other samples
    rng = np.random.default_rng(0)
    n = 40
    x = rng.standard_normal((3, n))
    H = 1e3 * sum(np.outer(v, v) for v in x) / n
    dL = np.full(n, 4.0)
    dL[:5] = [1e40, 1e36, 1e30, 1e20, 1e10]
    H[np.diag_indices(n)] += dL
    g = rng.standard_normal(n)
    d, solver = levenberg_marquardt_direction(H, g, None)
    assert solver == "cholesky"
    # the Levenberg-Marquardt system, solved on its own scale (diagonal scaling)
    mu = LM_FACTOR * np.linalg.norm(g)
    A = H + mu * np.eye(n)
    s = 1.0 / np.sqrt(np.diag(A))
    expected = -s * scipy.linalg.solve(A * np.outer(s, s), s * g, assume_a="pos")
    free = slice(5, None)
    np.testing.assert_allclose(d[free], expected[free], rtol=1e-8)
    # a descent direction whose decrement is that of the Newton system
    assert float(g @ d) == pytest.approx(float(g @ expected), rel=1e-8)


def test_logistic_l1_on_rank_one_kernels_converges_and_is_certified():
    K, y = wdbc_rank_one()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=L1(), C=C)
    res = Spicy(tol=TOL, max_iter=20).solve(pb)
    assert res.iterations <= 10, res.message
    newton = sum(h["newton_steps"] for h in res.history)
    assert newton <= 100, newton
    ref = solve_reference(K, y, "logistic", "l1", C)
    assert_certified(res, K, y, ref, "logistic", "l1", C, tol=TOL, problem=pb)


def test_an_inner_solve_that_reaches_the_gap_is_not_retried():
    # the last inner problem stops as soon as its update is certain to meet tol
    # ("gap reached"): that point is taken, not thrown away for a smaller gamma
    K, y = wdbc_rank_one(1.0, 120)
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=L1(), C=3e-3)
    res = Spicy(tol=1e-2).solve(pb)
    assert res.status == Status.CONVERGED and res.gap <= 1e-2
    assert res.history[-1]["inner_status"] == "gap reached"
    assert sum(h["gamma_retries"] for h in res.history) == 0
    assert res.iterations <= 4
