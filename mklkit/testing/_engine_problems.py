"""The problems of the engine kit (:mod:`mklkit.testing.engines`).

Small real problems from the bundled data: :func:`sample_points` (subsets of
``sonar`` for classification and ``liver`` for regression), the bank
:func:`sample_bank` held as one array or as its :func:`exact_factors`, and
:func:`engine_problems`, every loss × regularizer pair an engine supports at
a ``C`` where α = 0 is not optimal.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..components.losses import EpsInsensitive, Hinge, Logistic, Squared
from ..components.elasticnet import ElasticNet, L1, Uniform
from ..components.kl import KL
from ..components.lq import Lq
from ..data import load_builtin
from ..engines import common
from ..kernels.factor import FactorBank
from ..problem import Problem

__all__ = ["KitProblem", "sample_bank", "sample_points", "exact_factors", "KIT_REPRESENTATIONS", "engine_problems"]


def standardize(X: np.ndarray) -> np.ndarray:
    """Columns centred and scaled to unit standard deviation (constant columns centred only)."""
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def rbf(X: np.ndarray, width: float) -> np.ndarray:
    r"""The Gaussian kernel :math:`\exp(-\|x - x'\|^2/(2w^2))` on the rows of ``X``."""
    sq = np.sum(X**2, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0)
    return np.exp(-d2 / (2 * width**2))


def sample_bank(X: np.ndarray) -> np.ndarray:
    """RBF and polynomial kernels on all features and on single features, and a rank-one
    kernel, each of unit trace: a small bank with active, inactive and degenerate kernels."""
    d = X.shape[1]
    Ks = [rbf(X, w * math.sqrt(d)) for w in (0.5, 1.0, 2.0)]
    Ks += [(X @ X.T / d + 1.0) ** p for p in (1, 2)]
    Ks += [rbf(X[:, [j]], 1.0) for j in range(0, d, max(1, d // 4))][:4]
    Ks += [np.outer(X[:, 0], X[:, 0])]  # rank one
    K = np.array([k / np.trace(k) for k in Ks])
    return np.ascontiguousarray(0.5 * (K + K.transpose(0, 2, 1)))


def sample_points(name: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random rows of a bundled data set, standardized, and their targets.

    ``sonar``: the 60 features and the ±1 labels; ``liver``: the five blood
    tests and the standardized ``drinks`` column (a regression target).
    """
    ds = load_builtin(name)
    rows = np.random.default_rng(seed).permutation(ds.n_samples)[:n]
    if name == "liver":
        t = ds.X[rows, 5]
        return standardize(ds.X[rows, :5]), (t - t.mean()) / t.std()
    return standardize(ds.X[rows]), ds.y[rows].astype(np.float64)


#: Bank representations the kit builds its problems in (``representation=``).
KIT_REPRESENTATIONS: tuple[str, ...] = ("array", "factor")


def exact_factors(K: np.ndarray, rtol: float = 1e-10) -> Any:
    r"""A :class:`~mklkit.kernels.factor.FactorBank` of the Gram bank ``K`` (M, N, N): block
    ``m`` is :math:`V_m\Lambda_m^{1/2}` of the eigenvalues of :math:`K_m` above ``rtol``
    times its largest, so :math:`L_mL_m^\top = K_m` up to that relative error."""
    blocks = []
    for Km in K:
        w, V = np.linalg.eigh(0.5 * (Km + Km.T))
        keep = w > rtol * max(float(w[-1]), 0.0)
        blocks.append(np.ascontiguousarray(V[:, keep] * np.sqrt(w[keep])))
    return FactorBank.from_blocks(blocks)


@functools.lru_cache(maxsize=None)
def _data(task: str, n: int, seed: int, representation: str = "array") -> tuple[Any, np.ndarray]:
    X, y = sample_points("sonar", n, seed) if task == "classification" else sample_points("liver", n, seed + 1)
    K = sample_bank(X)
    if representation == "factor":
        # the problem is the factor bank's own (exact to 1e-10), also for the reference
        return exact_factors(K), y
    return K, y


def _representation(engine: Any, representation: str | None) -> str:
    """The kit's representation for ``engine``: the one asked, else ``array`` when the engine
    takes it, else ``factor`` when it takes that (``array`` otherwise)."""
    if representation is not None:
        if representation not in KIT_REPRESENTATIONS:
            raise ValueError(f"representation must be one of {', '.join(KIT_REPRESENTATIONS)}; got {representation!r}")
        return representation
    reps = tuple(getattr(engine, "representations", ("array",)))
    return "factor" if "array" not in reps and "factor" in reps else "array"


@dataclass
class KitProblem:
    """One problem of the kit: a label for reports and the :class:`~mklkit.problem.Problem`."""

    label: str
    problem: Any


def _builtin_components() -> tuple[list[Any], list[Any]]:
    return (
        [Hinge(), Logistic(), Squared(), EpsInsensitive(eps=0.1)],
        [L1(), ElasticNet(lam=0.5), Lq(q=1.5), Uniform(), KL()],
    )


def _choose_C(problem: Any) -> float:
    """A ``C`` at which α = 0 is not optimal: 0.3 ``C_max`` (0.1 when ``C_max`` is infinite)."""
    c_max = common.zero_solution(problem).C_max
    return 0.3 * c_max if math.isfinite(c_max) and c_max > 0 else 0.1


def engine_problems(
    engine: Any,
    *,
    losses: Sequence[Any] | None = None,
    regularizers: Sequence[Any] | None = None,
    extra_losses: Iterable[Any] = (),
    extra_regularizers: Iterable[Any] = (),
    n_samples: int = 40,
    seed: int = 0,
    representation: str | None = None,
) -> list[KitProblem]:
    """The kit's problems that ``engine`` supports.

    Every loss × regularizer pair (the built-ins by default, plus the extra
    components) on ``n_samples`` bundled points: ``sonar`` for a
    classification loss, ``liver`` for a regression loss; ``C`` is 0.3
    ``C_max`` (0.1 for a regularizer without a threshold).  The bank is
    :func:`sample_bank`, held as one array (``representation="array"``) or
    as its exact factors (``"factor"``, :func:`exact_factors`); by default
    ``array`` when the engine's ``representations`` have it, else ``factor``
    when they have that.

    An engine that accepts sample weights (``Requires(sample_weight=True)``)
    also gets, for every loss, its first supported pair again with integer
    weights in {1, 2, 3} (``weighted`` in the label).
    """
    representation = _representation(engine, representation)
    b_losses, b_regs = _builtin_components()
    losses = list(b_losses if losses is None else losses) + list(extra_losses)
    regs = list(b_regs if regularizers is None else regularizers) + list(extra_regularizers)
    weighs = bool(getattr(engine.requirements(), "sample_weight", False))
    out = []
    for loss in losses:
        K, y = _data(loss.task, int(n_samples), int(seed), representation)
        data = "sonar" if loss.task == "classification" else "liver"
        w = np.random.default_rng(int(seed) + 1).integers(1, 4, size=y.size).astype(np.float64)
        weighted_left = weighs  # the first supported pair of each loss once more with weights
        for reg in regs:
            kp = _kit_problem(engine, data, K, y, loss, reg)
            if kp is not None:
                out.append(kp)
            if weighted_left and (kw := _kit_problem(engine, data, K, y, loss, reg, w)) is not None:
                out.append(kw)
                weighted_left = False
    return out


def _kit_problem(
    engine: Any, data: str, K: Any, y: np.ndarray, loss: Any, reg: Any, sample_weight: np.ndarray | None = None
) -> KitProblem | None:
    """The kit's problem of ``loss`` x ``reg`` (weighted with ``sample_weight``) at its ``C``, or None
    when ``engine`` does not support it."""
    pb = Problem(K=K, y=y, loss=loss, regularizer=reg, C=1.0, sample_weight=sample_weight)
    try:
        if engine.supports(pb) is not None:
            return None
        pb.C = float(_choose_C(pb))
    except Exception:  # noqa: BLE001 - reported by the checks that use the problem
        pb.C = 0.1
    label = f"{data} {loss.describe()} x {reg.describe()}, C = {pb.C:.4g}"
    return KitProblem(label + (", weighted" if sample_weight is not None else ""), pb)


def with_C(problem: Any, C: float) -> Any:
    """The same problem at another ``C`` (a new object: engines may keep state on the old one)."""
    return Problem(
        K=problem.__dict__["_K"],
        y=problem.y,
        loss=problem.loss,
        regularizer=problem.regularizer,
        C=C,
        bias=problem.bias,
        kernel_names=problem.kernel_names,
        extra=dict(problem.extra),
        sample_weight=problem.sample_weight,
    )
