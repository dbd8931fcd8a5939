r"""Factors that follow the solution: more rank for the approximated kernels the solution uses.

After the first solve on a factor bank, :func:`refine_factors` repeats at most
:attr:`RefineSettings.rounds` times: the kernels *wanted* (active, or with a dual block norm at least
:attr:`RefineSettings.near` times the least active one's) whose relative residual trace is above
:attr:`RefineSettings.tol` get :attr:`RefineSettings.growth` times their rank by the same
factorization continued (within the caps and the memory budget's share), and every problem is solved
again, warm-started from a point that predicts what the last solution predicted (:func:`carried`).
It stops when no wanted kernel is left above ``tol`` (``"converged"``), when the ranks cannot grow by
:data:`MIN_GROWTH` (``"memory budget"``, ``"rank cap"``), or after the last round (``"rounds"``).
Measurements: ``docs/factor_banks.md`` ("Factors that follow the solution").
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .bank_settings import RefineSettings, refine_rounds

#: Flops of one Newton step on a block that the default rank cap allows, N r^2 (about a second on
#: two cores): rank 2,580 at N = 3,000, 1,150 at 15,000, 700 at 40,000.
BLOCK_WORK = 2e10

#: A round is taken only if it grows the chosen kernels' total rank by this factor at least
#: (``docs/tuned_constants.md``).
MIN_GROWTH = 1.25


@dataclass
class FactorRefinement:
    """What :func:`refine_factors` did: per round the ``kernels`` refined, their ``ranks_before``/``_after``
    and ``trace_error_before``/``_after``, the new bank's ``total_rank``, ``n_active`` and ``gap`` per
    problem, ``time_s``."""

    rounds: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""
    time_s: float = 0.0
    settings: RefineSettings = field(default_factory=RefineSettings)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return asdict(self)

    def summary(self) -> str:
        """One line per round, and why it stopped."""
        lines = [
            f"round {i + 1}: {len(r['kernels'])} kernels, rank {_span(r['ranks_before'])} -> "
            f"{_span(r['ranks_after'])}, residual trace {_span(r['trace_error_before'], '.3g')} -> "
            f"{_span(r['trace_error_after'], '.3g')}, total rank {r['total_rank']}, "
            f"{r['time_s']:.2f} s"
            for i, r in enumerate(self.rounds)
        ]
        lines.append(f"stopped: {self.stopped} ({self.time_s:.2f} s)")
        return "\n".join(lines)


def _span(values: Sequence[float], fmt: str = "d") -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if lo == hi else f"{format(lo, fmt)}..{format(hi, fmt)}"


def wanted_kernels(bank: Any, results: Sequence[Any], near: float) -> np.ndarray:
    """Kernels active in some result, or with a dual block norm at least ``near`` times the
    least active one's (a boolean mask, (M,))."""
    M = bank.shape[0]
    want = np.zeros(M, dtype=bool)
    for r in results:
        active = np.asarray(r.kernel_weights, dtype=np.float64) > 0.0
        want |= active
        if active.any() and r.dual is not None:
            norms = bank.dual_block_norms(np.ascontiguousarray(r.dual, dtype=np.float64))
            want |= norms >= near * float(norms[active].min())
    return want


def carried(old: Any, new: Any, kernels: Sequence[int], result: Any) -> Any:
    r"""``result`` as a warm start on the refined bank ``new``: each refined kernel's
    :math:`\beta'_m = \arg\min\|L'_m\beta' - L_m\beta_m\|` (exact for a continued factorization) with
    the minimum-norm :math:`\alpha'_m = L'_m G^+\beta'_m`, :math:`G = L_m'^\top L'_m`."""
    import dataclasses

    from scipy.linalg import eigh

    alpha = np.array(result.alpha, dtype=np.float64, copy=True)
    for m in kernels:
        a = alpha[m]
        if not np.any(a):
            continue
        Lo, Ln = old.block(m), new.block(m)
        f = Lo.T @ (Lo @ a)  # L_m beta_m: kernel m's part of the prediction
        w, V = eigh(Ln @ Ln.T, check_finite=False)
        keep = w > 1e-12 * max(float(w[-1]), 0.0) * w.size
        V, w = V[:, keep], w[keep]
        beta = V @ ((V.T @ (Ln @ f)) / w)  # G^+ L'^T f
        alpha[m] = Ln.T @ (V @ ((V.T @ beta) / w))
    return dataclasses.replace(result, alpha=alpha)


def _new_ranks(bank: Any, chosen: np.ndarray, settings: RefineSettings, budget: float) -> tuple[np.ndarray, str]:
    """Ranks for the ``chosen`` kernels, ``growth`` times theirs within the caps and the budget's share,
    and why not (``""``, ``"rank cap"``, ``"memory budget"``)."""
    from ..kernels.factorize.build import _working_bytes

    M, N, _ = bank.shape
    old = bank.ranks[chosen]
    cap = min(N, settings.max_rank if settings.max_rank is not None else int(math.sqrt(BLOCK_WORK / N)))
    new = np.minimum(np.ceil(old * settings.growth).astype(np.int64), cap)
    working = _working_bytes(N, [bank.factor_map.kernels[m].spec for m in chosen])
    rows = int(min(settings.share * budget, budget - working) // (8 * N)) - int(bank.ranks.sum() - old.sum())
    if new.sum() > rows:  # share what fits in proportion to the growth asked for
        extra = max(rows - int(old.sum()), 0)
        asked = new - old
        new = old + np.floor(asked * (extra / max(int(asked.sum()), 1))).astype(np.int64)
    if new.sum() < MIN_GROWTH * old.sum():  # a round that adds little costs a whole solve
        capped = np.minimum(np.ceil(old * settings.growth), cap).sum() < MIN_GROWTH * old.sum()
        return new, ("rank cap" if capped else "memory budget")
    return new, ""


def refine_factors(
    bank: Any,
    X: Any,
    results: list[Any],
    resolve: Callable[[Any, list[Any]], list[Any]],
    *,
    settings: RefineSettings | None = None,
    memory_budget: float,
    seed: int = 0,
    sample_weight: np.ndarray | None = None,
    progress: Callable[[dict[str, Any]], Any] | None = None,
) -> tuple[Any, list[Any], FactorRefinement]:
    """Grow the factors of the kernels the solutions use and solve again (module docstring).

    ``bank`` was made by :func:`~mklkit.kernels.build_factor_bank` on ``X`` (and ``sample_weight``);
    ``resolve(new_bank, warm)`` solves the problems again, one result per result of ``results``;
    ``progress`` is called with each round's record.  Returns the last bank, its results and the
    :class:`FactorRefinement`.
    """
    from ..kernels.factorize.build import APPROX_METHODS, refactor_kernels

    settings = settings or RefineSettings()
    out = FactorRefinement(settings=settings)
    t_start = time.perf_counter()
    approx = np.array([k.method in APPROX_METHODS for k in bank.factor_map.kernels], dtype=bool)
    for round_ in range(settings.rounds + 1):
        rel = bank.relative_trace_error
        chosen = np.flatnonzero(wanted_kernels(bank, results, settings.near) & approx & (rel > settings.tol))
        if chosen.size == 0:
            out.stopped = "converged"
            break
        if round_ == settings.rounds:
            out.stopped = "rounds"
            break
        new, why = _new_ranks(bank, chosen, settings, memory_budget)
        grow = new > bank.ranks[chosen]
        if why or not grow.any():
            out.stopped = why or "memory budget"
            break
        chosen, new = chosen[grow], new[grow]
        t0 = time.perf_counter()
        before = bank.ranks[chosen].tolist()
        old = bank
        bank = refactor_kernels(
            bank, X, chosen, new, tol=settings.tol, seed=seed, memory_budget=memory_budget, sample_weight=sample_weight
        )
        results = resolve(bank, [carried(old, bank, chosen, r) for r in results])
        rec = {
            "kernels": chosen.tolist(),
            "ranks_before": before,
            "ranks_after": bank.ranks[chosen].tolist(),
            "trace_error_before": rel[chosen].tolist(),
            "trace_error_after": bank.relative_trace_error[chosen].tolist(),
            "total_rank": int(bank.total_rank),
            "n_active": [int(len(r.active_set)) for r in results],
            "gap": [float(r.gap) for r in results],
            "time_s": time.perf_counter() - t0,
        }
        out.rounds.append(rec)
        if progress is not None:
            progress(rec)
    out.time_s = time.perf_counter() - t_start
    return bank, results, out


def refine_prepared(
    prepared: Any,
    results: list[Any],
    resolve: Callable[[Any, list[Any]], list[Any]],
    memory_budget: float | None,
    C: Any,
    progress: Callable[[dict[str, Any]], Any] | None = None,
) -> tuple[Any, list[Any], FactorRefinement | None]:
    """:func:`refine_factors` for the problems of a :class:`~mklkit.pipeline.Prepared` (``resolve(prepared,
    warm)`` solves them on the new bank) as many rounds as its factor settings ask for (:func:`refine_rounds`, by
    default with ``C="path"`` as asked for, not the path of ``"auto"``), within ``memory_budget`` (``None``: the
    default): the last prepared problem, the results and the record (``None`` without refinement, and for banks
    not built from data as factors)."""
    from ..kernels import DEFAULT_MEMORY_BUDGET
    from ..kernels.factorize import FactorMap

    settings = getattr(prepared.chosen, "settings", None)  # None: factors given, not built here
    built = isinstance(getattr(prepared.bank, "factor_map", None), FactorMap)
    factored = prepared.representation == "factor" and settings is not None and built
    path = isinstance(C, str) and C == "path"
    rounds = refine_rounds(getattr(settings, "refine", "auto"), path=path) if factored else 0
    if not rounds:
        return prepared, results, None
    held = [prepared]

    def on_bank(bank: Any, warm: list[Any]) -> list[Any]:
        held[0] = held[0].with_bank(bank)
        return resolve(held[0], warm)

    _, results, info = refine_factors(
        prepared.bank,
        prepared.data.X_train,
        results,
        on_bank,
        settings=RefineSettings(rounds=rounds, tol=float(settings.tol)),
        memory_budget=memory_budget or DEFAULT_MEMORY_BUDGET,
        seed=int(settings.seed),
        sample_weight=prepared.data.w_train,
        progress=progress,
    )
    return held[0], results, info
