"""The problems of the engine kit: bundled points, the bank :func:`sample_bank` (as an array or its
:func:`exact_factors`), every loss × regularizer pair an engine supports at a ``C`` where α = 0 is not optimal."""

from __future__ import annotations

import dataclasses
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
    """``n`` random rows of a bundled data set, standardized, and their targets: ``sonar`` and its
    ±1 labels, or ``liver``'s five blood tests and its standardized ``drinks`` column."""
    ds = load_builtin(name)
    rows = np.random.default_rng(seed).permutation(ds.n_samples)[:n]
    if name == "liver":
        t = ds.X[rows, 5]
        return standardize(ds.X[rows, :5]), (t - t.mean()) / t.std()
    return standardize(ds.X[rows]), ds.y[rows].astype(np.float64)


#: Bank representations the kit builds its problems in (``representation=``).
KIT_REPRESENTATIONS: tuple[str, ...] = ("array", "factor")


def exact_factors(K: np.ndarray, rtol: float = 1e-10) -> Any:
    r"""The :class:`~mklkit.kernels.factor.FactorBank` of the Gram bank ``K`` (M, N, N): blocks
    :math:`V_m\Lambda_m^{1/2}` of the eigenvalues above ``rtol`` times the largest."""
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
    return (exact_factors(K) if representation == "factor" else K), y


def _representation(engine: Any, representation: str | None) -> str:
    """The representation asked, else ``factor`` for an engine that takes it but not ``array``."""
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

    Every loss × regularizer pair (the built-ins by default, plus the extra components) on
    ``n_samples`` points of ``sonar`` (classification) or ``liver`` (regression), at ``C`` = 0.3
    ``C_max`` (0.1 without a threshold), the bank held as an array or as its exact factors
    (``representation``; by default ``array`` when the engine takes it).  An engine that accepts
    sample weights also gets each loss's first supported pair with integer weights in {1, 2, 3}.
    """
    representation = _representation(engine, representation)
    if losses is None:
        losses = [Hinge(), Logistic(), Squared(), EpsInsensitive(eps=0.1)]
    if regularizers is None:
        regularizers = [L1(), ElasticNet(lam=0.5), Lq(q=1.5), Uniform(), KL()]
    losses = list(losses) + list(extra_losses)
    regs = list(regularizers) + list(extra_regularizers)
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
    """The kit's problem of ``loss`` x ``reg`` at its ``C``, or None when ``engine`` does not support it."""
    pb = Problem(K=K, y=y, loss=loss, regularizer=reg, C=1.0, sample_weight=sample_weight)
    try:
        if engine.supports(pb) is not None:
            return None
        c_max = common.zero_solution(pb).C_max  # a C at which alpha = 0 is not optimal
        pb.C = float(0.3 * c_max) if math.isfinite(c_max) and c_max > 0 else 0.1
    except Exception:  # noqa: BLE001 - reported by the checks that use the problem
        pb.C = 0.1
    label = f"{data} {loss.describe()} x {reg.describe()}, C = {pb.C:.4g}"
    return KitProblem(label + (", weighted" if sample_weight is not None else ""), pb)


def with_C(problem: Any, C: float) -> Any:
    """The same problem at another ``C``, a new object (engines may keep state on the old one)."""
    return dataclasses.replace(problem, K=problem.__dict__["_K"], C=C, extra=dict(problem.extra))
