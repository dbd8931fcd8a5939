"""Problem assembly: the engine probe, the :class:`Prepared` problem and :func:`prepare`."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from .bank import TestSide, build_bank, check_memory, choose_representation, expand_entries, factor_representation
from .bank import given_bank, given_factor_memory, rows_of
from ..plugins import get_registry
from .data import Data
from .errors import MISSING, PipelineError, one_line
from .bank_settings import BankSettings
from .problem_settings import ProblemSettings, auto_C

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..engines.base import Engine
    from ..problem import Problem

logger = logging.getLogger("mklkit.pipeline")


def _probe_rows(y: np.ndarray, n: int = 6) -> np.ndarray:
    """A few row indices that include every label value."""
    import numpy as np

    rows: list[int] = [int(np.flatnonzero(y == v)[0]) for v in np.unique(y)[:n]]
    for i in range(min(n, y.shape[0])):
        if len(rows) >= n:
            break
        if i not in rows:
            rows.append(i)
    return np.array(sorted(rows), dtype=np.intp)


def probe_problem(
    y: np.ndarray,
    M: int,
    problem: ProblemSettings,
    representation: str = "array",
    sample_weight: np.ndarray | None = None,
) -> Problem:
    """A tiny problem with the real settings, labels, representation and sample weights, for ``supports``."""
    import numpy as np

    rows = _probe_rows(y)
    n = rows.size
    K = np.empty((max(M, 1), n, n))
    K[:] = np.eye(n) / n
    w = None if sample_weight is None else np.asarray(sample_weight)[rows]
    return _of_settings(problem, K, y[rows], extra={"representation": representation}, sample_weight=w)


def _of_settings(problem: ProblemSettings, K: Any, y: Any, **kw: Any) -> Problem:
    """The problem of the settings on ``K`` and ``y`` (a named C as 1.0)."""
    from ..problem import Problem

    C = 1.0 if isinstance(problem.C, str) else problem.C
    return Problem(K=K, y=y, loss=problem.loss, regularizer=problem.regularizer, C=C, bias=problem.bias, **kw)


def _unsupported(engine: Engine, problem: Problem) -> str | None:
    """Why ``engine`` cannot solve ``problem`` in its representation, or ``None``."""
    reason = engine.supports(problem)
    representation = problem.representation
    if reason is None and representation not in getattr(engine, "representations", ("array",)):
        reason = (
            f"it works on Gram banks held as one array, not as a {representation} bank "
            f"(its representations: {', '.join(getattr(engine, 'representations', ('array',)))})"
        )
    return reason


def check_support(engine: Engine, problem: Problem, key: str = "engine.name") -> None:
    """Refuse an engine that cannot solve ``problem`` (its reason, and the engines that can)."""
    reason = _unsupported(engine, problem)
    representation = problem.representation
    if reason is None:
        return
    ok = [
        n
        for n in get_registry().engines_supporting(problem, exclude=engine.name)
        if representation in getattr(get_registry().get("engine", n), "representations", ("array",))
    ]
    combo = f"loss {problem.loss.name!r} x regularizer {problem.regularizer.name!r}"
    if representation != "array":
        combo += f" on a {representation} bank"
    if problem.sample_weight is not None:
        combo += " with sample weights"
    allowed = (
        f"an engine that supports {combo}: {', '.join(ok)}"
        if ok
        else f"another loss or regularizer (no installed engine supports {combo})"
    )
    raise PipelineError(
        key, f"engine {engine.name!r} cannot solve this problem: {one_line(reason)}", engine.name, allowed
    )


@dataclass
class Prepared:
    """Everything an engine needs, plus the test side for evaluation.

    ``problem`` is ``None`` when prepared with ``build=False`` (``mklkit validate``); ``bank`` maps new
    points (``cross``, ``normalize_cross`` or ``transform``); ``test`` is ``None`` without a test part;
    ``timings`` holds ``data_s`` and ``bank_s``; ``memory`` the estimated bytes of the training bank
    (``train``), the test kernels (``test``) and their ``peak``.
    """

    data: Data
    problem: Problem | None
    bank: Any
    test: TestSide | None
    kernel_names: list[str]
    n_kernels: int
    representation: str = "array"
    timings: dict[str, float] = field(default_factory=dict)
    memory: dict[str, int] = field(default_factory=dict)
    #: the :class:`~mklkit.spec.Spec` of ``mklkit run``, or ``None``
    spec: Any = None
    #: the representation with its settings, or ``None`` for given kernels or factors
    chosen: Any = None
    #: more than two classes: the binary tasks (:class:`mklkit._multiclass.BinaryTask`) on the one
    #: bank, :attr:`problem` the first; ``None`` otherwise
    tasks: list[Any] | None = None

    @property
    def K_test(self) -> np.ndarray | None:
        """Test kernels (M, N_test, N), when the test side has them."""
        return None if self.test is None else self.test.K

    def with_C(self, C: float) -> "Prepared":
        """The same prepared problem at another C (the bank is shared)."""
        assert self.problem is not None
        return replace(self, problem=problem_at(self.problem, C=C))

    def with_bank(self, bank: Any) -> "Prepared":
        """The same prepared problem on another bank of the same kernels and points (refined factors)."""
        assert self.problem is not None
        return replace(self, bank=bank, problem=problem_at(self.problem, K=bank))

    def subproblem(self, y: np.ndarray, rows: np.ndarray | None = None, C: float | None = None) -> Problem:
        """The problem on the training rows ``rows`` (``None``: all; a copy of their block of an
        array bank) with labels ``y``, at ``C``."""
        import numpy as np

        assert self.problem is not None
        if rows is None:
            return problem_at(self.problem, y=y, C=C)
        if self.representation != "array":
            raise ValueError(f"a {self.representation} bank has no row subsets (one-vs-one tasks need an array)")
        rows = np.asarray(rows, dtype=np.intp)
        w = self.problem.sample_weight
        return problem_at(
            self.problem, y=y, K=rows_of(self.problem.K, rows), C=C, sample_weight=w if w is None else w[rows]
        )

    def task(self, t: int) -> "Prepared":
        """The binary task ``t`` as a binary :class:`Prepared`: +1 for the class ``positive``, -1 for
        the rest on the shared bank (one-vs-rest), or the rows of its two classes only (one-vs-one)."""
        import numpy as np

        assert self.tasks is not None and self.problem is not None
        task = self.tasks[t]
        y_test, binary = self.data.y_test, {"y_train": task.y, "classes": None, "positive": None}
        if task.rows is None:
            yt = None if y_test is None else np.where(y_test == task.positive, 1.0, -1.0)
            return replace(
                self, data=replace(self.data, y_test=yt, **binary), problem=self.subproblem(task.y), tasks=None
            )
        rows = np.asarray(task.rows, dtype=np.intp)
        w, X = self.data.w_train, self.data.X_train
        test, yt = self.test, None
        if y_test is not None and test is not None and test.K is not None:
            sel = np.flatnonzero((y_test == task.positive) | (y_test == task.negative))
            test = replace(test, K=np.ascontiguousarray(test.K[:, sel][:, :, rows]), _factor_rows=None)
            yt = np.where(y_test[sel] == task.positive, 1.0, -1.0)
        data = replace(
            self.data, y_test=yt, X_train=X if X is None else X[rows], w_train=w if w is None else w[rows], **binary
        )
        problem = self.subproblem(task.y, rows)
        return replace(self, data=data, problem=problem, tasks=None, test=test if yt is not None else None)

    def class_index(self, results: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """Predicted class indices on the training and test parts (``None`` without one) from one
        result per task: the largest decision value (one-vs-rest) or the pairs' votes
        (:func:`mklkit._multiclass.ovo_decision`)."""
        import numpy as np

        from .._multiclass import ovo_decision

        assert self.tasks is not None and self.problem is not None and self.data.classes is not None
        tasks, k = self.tasks, len(self.data.classes)
        ovr = all(t.rows is None for t in tasks)

        def classes(train: bool) -> np.ndarray | None:
            if not train and self.test is None:
                return None
            if ovr:
                decide = self.train_decision if train else self.test_decision
                return np.argmax(np.column_stack([decide(r) for r in results]), axis=1)
            side = TestSide(K=self.problem.K) if train else self.test
            F = np.column_stack([side.decision_function(r, self.bank, rows=t.rows) for r, t in zip(results, tasks)])
            return np.argmax(ovo_decision(F, tasks, k), axis=1)

        return classes(True), classes(False)

    def train_decision(self, result: Any) -> np.ndarray:
        """Training predictions of a solve result, in the bank's representation."""
        assert self.problem is not None
        if self.representation == "array":
            return result.decision_function(self.problem.K)
        import numpy as np

        act = np.asarray(result.active_set, dtype=np.int64)
        f = self.problem.bank.combine(np.asarray(result.alpha, dtype=np.float64), act) if act.size else 0.0
        return np.zeros(self.problem.n_samples) + f + float(result.bias)

    def test_decision(self, result: Any) -> np.ndarray | None:
        """Test predictions of a solve result (``None`` without a test part)."""
        return None if self.test is None else self.test.decision_function(result, self.bank)

    def close(self) -> None:
        """Release a bank held elsewhere (the shards of a ShardedBank)."""
        close = getattr(self.bank, "close", None)
        if close is not None and self.representation == "sharded":
            close()


def problem_at(
    problem: Problem, *, y: Any = None, K: Any = None, C: float | str | None = None, sample_weight: Any = MISSING
) -> Problem:
    """``problem`` with other labels, kernels, C (``"auto"``: :func:`auto_C`) or sample weights
    (``None``: unweighted; not given: the problem's); its bank shared."""
    import numpy as np

    if K is None:
        K = problem.K if problem.representation == "array" else problem.bank
    if isinstance(C, str) and C == "auto":
        C = auto_C(problem)
    return replace(
        problem,
        K=K,
        y=problem.y if y is None else np.ascontiguousarray(y, dtype=np.float64),
        C=problem.C if C is None else float(C),
        extra=dict(problem.extra),
        sample_weight=problem.sample_weight if sample_weight is MISSING else sample_weight,
    )


def _check_labels(d: Data, problem: ProblemSettings) -> tuple[Any, list[Any] | None, bool]:
    """The labels the checks see (a multiclass target's first one-vs-rest task's), the tasks (or
    ``None``) and whether they are one-vs-one."""
    ovo = d.multiclass and problem.multiclass == "ovo"
    if not d.multiclass:
        return d.y_train, None, ovo
    import numpy as np

    from .._multiclass import ovo_tasks, ovr_tasks

    assert d.classes is not None
    codes = np.asarray(d.y_train, dtype=np.intp)
    ovr = ovr_tasks(codes, len(d.classes))
    return ovr[0].y, ovo_tasks(codes, len(d.classes)) if ovo else ovr, ovo


def _held(held: Prepared, bank: Any, test: TestSide | None) -> Prepared:
    """``held`` with its built ``bank`` (the names it gives its kernels) and test side."""
    names = bank.factor_map.names if held.representation == "factor" else bank.names
    return replace(held, bank=bank, test=test, kernel_names=list(names))


def _held_given(
    d: Data, bank: BankSettings, problem: ProblemSettings, engine: Engine, y: Any, build: bool, engine_key: str
) -> Prepared:
    """Given Gram matrices (held as one array) or factors: checked, then (``build``) held with their test side."""
    factors = d.factor_starts is not None
    M = int(d.factor_starts.size - 1) if factors else int(d.K_train.shape[0])  # type: ignore[union-attr]
    rep = "factor" if factors else "array"
    names = list(d.kernel_names or [f"k{m}" for m in range(M)])
    check_support(engine, probe_problem(y, M, problem, rep, d.w_train), engine_key)
    held = Prepared(d, None, None, None, names, M, rep, memory=given_factor_memory(d) if factors else {})
    if not build:
        return held
    return _held(held, *given_bank(d, bank))


def _choose(
    specs: list[Any], d: Data, bank: BankSettings, problem: ProblemSettings, engine: Engine, y: Any, ovo: bool
) -> Any:
    """The representation of an expanded description (logged when chosen)."""
    chosen = bank.representation
    rep = chosen.kind
    if ovo and rep not in ("auto", "array"):
        raise PipelineError(
            "problem.multiclass",
            f"one-vs-one problems take row blocks of Gram matrices; the bank is held as a {rep} bank",
            "ovo",
            "ovr, or Gram matrices (kernels.factor: false, no kernels.sharded)",
        )
    if rep == "auto":
        chosen, why = choose_representation(  # one-vs-one takes row blocks of Gram matrices
            specs,
            d.n_train,
            d.n_test,
            bank,
            not ovo and _unsupported(engine, probe_problem(y, len(specs), problem, "factor", d.w_train)) is None,
        )
        # a warning when it approximates; Gram matrices are the usual case
        level = logging.DEBUG if chosen.kind != "factor" else logging.INFO if chosen.rank is None else logging.WARNING
        logger.log(level, "kernels: %s", why)
    elif rep == "factor" and not chosen.settings.model_fields_set - {"refine"}:
        # kernels.factor: true or only refine given: the factors "auto" would take, refined as asked
        fixed, why = factor_representation(specs, d.n_train, bank)
        if fixed is not None:  # None: nothing fits, and the factorization says what it needs
            given = "true"
            if "refine" in chosen.settings.model_fields_set:
                given = f"{{refine: {chosen.settings.refine}}}"
                fixed = replace(fixed, settings=fixed.settings.model_copy(update={"refine": chosen.settings.refine}))
            chosen = fixed
            logger.info("kernels: factor: %s: %s", given, why)
    return chosen


def _held_described(
    d: Data,
    bank: BankSettings,
    problem: ProblemSettings,
    engine: Engine,
    y: Any,
    ovo: bool,
    build: bool,
    progress: Callable[[dict[str, Any]], Any] | bool | None,
    engine_key: str,
) -> Prepared:
    """A description expanded on the data's columns, its representation chosen, memory and engine
    checked, then (``build``) built."""
    bank.representation.check()
    specs = expand_entries(bank, d)
    M = len(specs)
    chosen = _choose(specs, d, bank, problem, engine, y, ovo)
    memory = check_memory(M, d.n_train, d.n_test, bank, chosen)
    check_support(engine, probe_problem(y, M, problem, chosen.kind, d.w_train), engine_key)
    held = Prepared(d, None, None, None, [k.label for k in specs], M, chosen.kind, memory=memory, chosen=chosen)
    return _held(held, *build_bank(d, bank, progress, chosen)) if build else held


def prepare(
    d: Data,
    bank: BankSettings,
    problem: ProblemSettings,
    engine: Engine,
    *,
    build: bool = True,
    progress: Callable[[dict[str, Any]], Any] | bool | None = None,
    engine_key: str = "engine.name",
) -> Prepared:
    """The bank of ``bank`` on ``d`` and the :class:`Problem`, checked before any kernel is built.

    The description is expanded on the data's columns, the memory budget checked and the engine asked
    on a tiny probe problem; then (``build=True``) the bank, its test side and the problem are built.
    ``build=False`` stops after the checks (``mklkit validate``; the problem is ``None``); ``progress``
    follows the bank build; ``engine_key`` names the engine in errors.

    Raises
    ------
    PipelineError
    """
    t0 = time.perf_counter()
    y, tasks, ovo = _check_labels(d, problem)
    if d.precomputed or d.factor_starts is not None:
        held = _held_given(d, bank, problem, engine, y, build, engine_key)
    else:
        held = _held_described(d, bank, problem, engine, y, ovo, build, progress, engine_key)
    if not build:
        return replace(held, timings={"bank_s": 0.0}, tasks=tasks)
    bank_s = time.perf_counter() - t0
    M, rep = len(held.kernel_names), held.representation
    logger.debug("built %d kernels (%s) on %d points in %.2f s", M, rep, d.n_train, bank_s)
    K = held.bank.K if rep == "array" else held.bank
    prob = _of_settings(problem, K, y, kernel_names=held.kernel_names, sample_weight=d.w_train)
    if isinstance(problem.C, str):  # "auto", and "path"'s prior (the run chooses it: api.solve_prepared)
        prob = problem_at(prob, C=auto_C(prob))
    check_support(engine, prob, engine_key)
    return replace(held, problem=prob, n_kernels=M, timings={"bank_s": bank_s}, tasks=tasks)
