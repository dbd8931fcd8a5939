r"""Conformance kit of engines: is the gap an engine reports honest?

:func:`check_engine` solves small real problems from the bundled data (:func:`engine_problems`) and
checks each result against what it claims (:data:`ENGINE_CHECKS`, described in docs/plugins.md §9):
the objectives are recomputed from the returned points, and the optimum comes from cvxpy + Clarabel
(:mod:`mklkit.testing.conic`) or else another registered engine solved to :math:`10^{-9}`.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..declaration import declaration_problems
from ._engine_checks import _Checker
from ._engine_problems import (
    KIT_REPRESENTATIONS,
    KitProblem,
    engine_problems,
    exact_factors,
    sample_bank,
    sample_points,
)
from ._report import ConformanceReport, _assert_ok, _Runner

__all__ = [
    "ENGINE_CHECKS",
    "KitProblem",
    "sample_bank",
    "sample_points",
    "exact_factors",
    "KIT_REPRESENTATIONS",
    "engine_problems",
    "check_engine",
    "assert_engine_conforms",
]

#: The checks of an engine, in report order.
ENGINE_CHECKS: tuple[str, ...] = tuple(
    """declaration problems honest_primal honest_dual gap_consistent gap_bounds_optimum status
    result_fields callback_stop max_iter warm_start""".split()
)


def check_engine(
    engine: Any,
    *,
    problems: Sequence[KitProblem] | None = None,
    losses: Sequence[Any] | None = None,
    regularizers: Sequence[Any] | None = None,
    extra_losses: Iterable[Any] = (),
    extra_regularizers: Iterable[Any] = (),
    max_problems: int | None = None,
    reference: str = "auto",
    n_samples: int = 40,
    seed: int = 0,
    rtol: float = 1e-7,
    representation: str | None = None,
) -> ConformanceReport:
    """Check an engine's results against what it claims.

    Parameters
    ----------
    engine : Engine
        The instance to check (``callback_stop`` and ``max_iter`` use copies with ``tol = 1e-12``
        and ``max_iter = 1``).
    problems : sequence of KitProblem, optional
        The problems to solve; by default :func:`engine_problems` with ``losses``,
        ``regularizers``, ``extra_losses``, ``extra_regularizers``, ``n_samples``, ``seed`` and
        ``representation`` (``"array"`` or ``"factor"``: how the bank is held).
    max_problems : int, optional
        Solve at most this many of them (the first ones).
    reference : {"auto", "conic", "engine", "none"}
        Where the optimum comes from: cvxpy + Clarabel when available, else another registered
        engine (``auto``); only one of them; none.
    rtol : float
        Relative tolerance of recomputed against reported values.

    Returns
    -------
    ConformanceReport
        One :class:`CheckResult` per check of :data:`ENGINE_CHECKS`; ``str(report)`` names the
        problem where a check failed and what disagreed.
    """
    if getattr(engine, "kind", None) != "engine" or isinstance(engine, type):
        raise TypeError(f"check_engine needs an engine instance (kind 'engine'); got {type(engine).__name__}")
    if reference not in ("auto", "conic", "engine", "none"):
        raise ValueError(f"reference must be 'auto', 'conic', 'engine' or 'none'; got {reference!r}")
    r = _Runner(engine)
    for name in ENGINE_CHECKS:
        r.identity(name)
    decl = r.identity("declaration")
    for msg in declaration_problems(type(engine)):
        decl.fail(msg)
    decl.note()
    if problems is None:
        problems = engine_problems(
            engine,
            losses=losses,
            regularizers=regularizers,
            extra_losses=extra_losses,
            extra_regularizers=extra_regularizers,
            n_samples=n_samples,
            seed=seed,
            representation=representation,
        )
    problems = list(problems)[:max_problems]
    if not problems:
        r.identity("problems").fail(
            "the engine supports none of the kit's problems (give extra_losses / extra_regularizers it supports)"
        )
        return r.report(seed)
    r.identity("problems").note(len(problems))
    _Checker(r, engine, rtol, reference).check(problems)
    return r.report(seed)


def assert_engine_conforms(engine: Any, **kw: Any) -> ConformanceReport:
    """Run :func:`check_engine` and raise ``AssertionError(str(report))`` on failure."""
    return _assert_ok(check_engine(engine, **kw))
