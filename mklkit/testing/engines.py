r"""Conformance kit for engines: is the gap an engine reports honest?

Every engine, built-in or from a plugin, can be checked with

>>> from mklkit.testing import check_engine            # doctest: +SKIP
>>> report = check_engine(MyEngine())                  # doctest: +SKIP
>>> print(report)                                      # doctest: +SKIP

or asserted in a test suite with :func:`assert_engine_conforms`.  The kit
builds small real problems from the bundled data (subsets of ``sonar`` for
classification and ``liver`` for regression, a bank of RBF, polynomial and
rank-one kernels of unit trace, :func:`sample_bank`), for every built-in
loss × regularizer pair the engine :meth:`~mklkit.engines.base.Engine.supports`
(and for the extra components given), solves them and checks the result
against what it claims.  Nothing is taken from the engine: the objectives
are recomputed from the returned points with the components' jitted functions
(:mod:`mklkit.engines.common`), and an optimum comes from a reference --
cvxpy with Clarabel when it is installed and the components have a conic
formulation (:mod:`mklkit.testing.conic`; the ``test`` extra has it),
otherwise a second registered engine that supports the problem, solved to
:math:`10^{-9}`.

Checks (:data:`ENGINE_CHECKS`), each aggregated over the problems:

``declaration``
    the class declaration, by the checker the registry uses
    (:func:`mklkit.declaration.declaration_problems`).
``problems``
    the engine supports at least one problem of the kit.
``honest_primal``
    the reported ``objective`` is :math:`P(\alpha, b)` recomputed at the
    returned :math:`\alpha`, :math:`b`.
``honest_dual``
    the result has a dual point, and the reported ``dual_objective`` is at
    most :math:`D` recomputed at that point after the standard projection
    (:func:`~mklkit.engines.common.projected_dual_objective`, SpicyMKL §6.1):
    a value that no feasible dual point attains certifies nothing.
``gap_consistent``
    the reported ``gap`` is :math:`(P - D)/|P|` of the reported values, not
    negative (weak duality), and at least the gap recomputed at the
    returned points.
``gap_bounds_optimum``
    the reported gap bounds the true one: :math:`(P(\alpha, b) - P^\star)/|P|
    \le` ``gap`` with :math:`P^\star` the reference optimum.
``status``
    ``converged`` exactly when the gap is at most ``tol``; a
    :class:`~mklkit.result.ConvergenceWarning` exactly for the unconverged
    statuses; no exception.
``result_fields``
    shapes and values of ``alpha``, ``bias``, ``kernel_weights`` (summing to
    1, or all 0), ``block_norms``, ``iterations``, ``engine``, and history
    records with ``iteration``, ``objective``, ``dual_objective``, ``gap``,
    ``n_active``, ``time_s``.
``callback_stop``
    a callback that returns True at the second record stops the solve:
    status ``stopped``, no further call, no warning, an honest result.
``max_iter``
    with ``max_iter = 1`` the solve ends ``max_iter`` with a
    ``ConvergenceWarning`` (or converged and certified), never an exception,
    with an honest result.
``warm_start``
    a result at a neighbouring ``C`` as ``warm_start``: used when
    ``supports_warm_start`` (the solve reaches the optimum of the new
    problem; a warm start of the wrong shape is a ``ValueError``), ignored
    otherwise (no exception either way).

Tolerances: recomputed values agree with the reported ones within
``rtol`` relative to their size (rounding of the sums); the reference
optimum is credited with ``ref_rtol`` (Clarabel's accuracy, or the
reference engine's certified gap).

The kit's problems are built in :mod:`mklkit.testing._engine_problems`, the
objectives recomputed and the reference optima found in
:mod:`mklkit.testing._engine_references`, and the checks made in
:mod:`mklkit.testing._engine_checks`.
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
    rbf,  # noqa: F401 - importable from here, as the kit's bank is built
    sample_bank,
    sample_points,
    standardize,  # noqa: F401 - importable from here, as the kit's points are standardized
)
from ._engine_references import dual_value, primal_value  # noqa: F401 - the recomputed objectives
from ._report import ConformanceReport, _Runner

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

ENGINE_CHECKS: tuple[str, ...] = (
    "declaration",
    "problems",
    "honest_primal",
    "honest_dual",
    "gap_consistent",
    "gap_bounds_optimum",
    "status",
    "result_fields",
    "callback_stop",
    "max_iter",
    "warm_start",
)
"""Names of the checks of an engine, in report order."""


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------
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
    """Check an engine's results against what it claims (module docstring).

    Parameters
    ----------
    engine : Engine
        The instance to check (its options are used as given; the
        ``callback_stop``, ``max_iter`` checks use copies with ``tol = 1e-12``
        and ``max_iter = 1``).
    problems : sequence of KitProblem, optional
        The problems to solve; by default :func:`engine_problems` with
        ``losses``, ``regularizers``, ``extra_losses``, ``extra_regularizers``,
        ``n_samples`` and ``seed``.
    max_problems : int, optional
        Solve at most this many of them (the first ones).
    reference : {"auto", "conic", "engine", "none"}
        Where the optimum comes from: cvxpy + Clarabel when available, else
        another registered engine (``auto``); only one of them; none.
    rtol : float
        Relative tolerance of recomputed against reported values.
    representation : {"array", "factor"}, optional
        How the default problems hold their bank (:func:`engine_problems`):
        by default as one array when the engine takes it, else as exact
        factors when it takes those.

    Returns
    -------
    ConformanceReport
        One :class:`CheckResult` per check of :data:`ENGINE_CHECKS`;
        ``report.ok`` tells whether all passed, ``str(report)`` names the
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
    problems = list(problems)[:max_problems] if max_problems is not None else list(problems)
    if not problems:
        r.identity("problems").fail(
            "the engine supports none of the kit's problems (give extra_losses / extra_regularizers it supports)"
        )
        return r.report(seed)
    r.identity("problems").note(len(problems))
    ck = _Checker(r, engine, rtol, reference)
    first = None
    for kp in problems:
        res = [None]

        def one(kp: KitProblem = kp, res: list = res) -> None:
            res[0] = ck.solve_and_check(kp)

        r.run(["status", "result_fields", "honest_primal", "honest_dual", "gap_consistent", "gap_bounds_optimum"], one)
        if first is None and res[0] is not None:
            first = (kp, res[0])
    kp0 = _behaviour_problem(problems)
    r.run("callback_stop", ck.callback_stop, kp0)
    r.run("max_iter", ck.max_iter, kp0)
    if first is not None:
        r.run("warm_start", ck.warm_start, *first)
    return r.report(seed)


def _behaviour_problem(problems: Sequence[KitProblem]) -> KitProblem:
    """The problem of the behaviour checks: a classification one where there is one (a
    regression loss such as the squared may be solved in one Newton step)."""
    for kp in problems:
        if kp.problem.loss.task == "classification":
            return kp
    return problems[0]


def assert_engine_conforms(engine: Any, **kw: Any) -> ConformanceReport:
    """Run :func:`check_engine` and raise ``AssertionError(str(report))`` on failure."""
    report = check_engine(engine, **kw)
    if not report.ok:
        raise AssertionError(str(report))
    return report
