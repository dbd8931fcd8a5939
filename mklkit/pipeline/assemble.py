"""Problem assembly: the engine probe, the :class:`Prepared` problem and :func:`prepare`."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from .bank import (
    TestSide,
    build_bank,
    check_memory,
    choose_representation,
    expand_entries,
    factor_representation,
    given_factor_bank,
    given_factor_memory,
    precomputed_bank,
    rows_of,
)
from ..plugins import get_registry
from .data import Data
from .errors import PipelineError, one_line
from .settings import BankSettings, ProblemSettings, auto_C

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..engines.base import Engine
    from ..problem import Problem

logger = logging.getLogger("mklkit.pipeline")


def _probe_rows(y: np.ndarray, n: int = 6) -> np.ndarray:
    """A few row indices that include every label value (both classes)."""
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
    """A tiny problem with the real loss, regularizer, C, bias, labels, representation and (their rows')
    sample weights, for ``supports``."""
    import numpy as np

    from ..problem import Problem

    rows = _probe_rows(y)
    n = rows.size
    K = np.empty((max(M, 1), n, n))
    K[:] = np.eye(n) / n
    return Problem(
        K=K,
        y=y[rows],
        loss=problem.loss,
        regularizer=problem.regularizer,
        C=1.0 if isinstance(problem.C, str) else problem.C,
        bias=problem.bias,
        extra={"representation": representation},
        sample_weight=None if sample_weight is None else np.asarray(sample_weight)[rows],
    )


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


def _supports(engine: Engine, problem: Problem) -> bool:
    return _unsupported(engine, problem) is None


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
    """Everything an engine needs, plus the test side for evaluation: the one prepared type.

    Attributes
    ----------
    data : Data
    problem : Problem or None
        ``None`` when prepared with ``build=False`` (``mklkit validate``).
    bank : KernelBank, ShardedBank, FactorBank or None
        The bank object (it knows how to map new points: ``cross``,
        ``normalize_cross`` or ``transform``).
    test : TestSide or None
        ``None`` without a test part.
    kernel_names : list of str
    n_kernels : int
    representation : str
    timings : dict
        ``data_s``, ``bank_s`` seconds.
    memory : dict
        Estimated bytes of the training bank (``train``), the test kernels
        (``test``) and their ``peak`` (checked against the budget).
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
    #: what it was prepared from (the :class:`~mklkit.spec.Spec` of ``mklkit run``), or ``None``
    spec: Any = None
    #: the representation with its settings (chosen by :func:`~mklkit.pipeline.bank.choose_representation`
    #: when the settings left it open), or ``None`` for given kernels or factors
    chosen: Any = None
    #: a target of more than two classes: its one-vs-rest problems (:class:`mklkit._multiclass.BinaryTask`,
    #: class k against the rest, on the one bank); :attr:`problem` is the first.  ``None`` otherwise.
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
        """The problem on the training rows ``rows`` (``None``: all) with labels ``y``, at ``C``.

        One binary task of a multiclass decomposition shares the bank: a
        one-vs-one task gets the ``M x n x n`` block of its rows (a copy, made
        here; only an array bank has one).
        """
        import numpy as np

        assert self.problem is not None
        if rows is not None and self.representation != "array":
            raise ValueError(f"a {self.representation} bank has no row subsets (one-vs-one tasks need an array)")
        K = None if rows is None else rows_of(self.problem.K, np.asarray(rows, dtype=np.intp))
        w = self.problem.sample_weight
        if w is not None and rows is not None:
            w = w[np.asarray(rows, dtype=np.intp)]
        return problem_at(self.problem, y=y, K=K, C=C, sample_weight=w)

    def task(self, t: int) -> "Prepared":
        """The binary problem ``t`` of a multiclass target as a binary :class:`Prepared`.

        One-vs-rest: its data's labels are +1 for the class ``tasks[t].positive``
        and -1 for the rest (training and test part); the bank is shared.
        One-vs-one: the rows of its two classes only (training and test part),
        +1 for ``positive``; the problem holds their block of the Gram matrices.
        """
        import numpy as np

        assert self.tasks is not None and self.problem is not None
        task = self.tasks[t]
        y_test = self.data.y_test
        if task.rows is None:
            data = replace(
                self.data,
                y_train=task.y,
                classes=None,
                positive=None,
                y_test=None if y_test is None else np.where(y_test == task.positive, 1.0, -1.0),
            )
            return replace(self, data=data, problem=self.subproblem(task.y), tasks=None)
        rows = np.asarray(task.rows, dtype=np.intp)
        w = self.data.w_train
        test, yt = self.test, None
        if y_test is not None and test is not None and test.K is not None:
            sel = np.flatnonzero((y_test == task.positive) | (y_test == task.negative))
            test = replace(test, K=np.ascontiguousarray(test.K[:, sel][:, :, rows]), _factor_rows=None)
            yt = np.where(y_test[sel] == task.positive, 1.0, -1.0)
        data = replace(
            self.data,
            y_train=task.y,
            classes=None,
            positive=None,
            y_test=yt,
            X_train=None if self.data.X_train is None else self.data.X_train[rows],
            w_train=None if w is None else w[rows],
        )
        return replace(
            self, data=data, problem=self.subproblem(task.y, rows), tasks=None, test=test if yt is not None else None
        )

    def class_index(self, results: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """Predicted class indices on the training and test parts from one result per task.

        One-vs-rest: each row goes to the class whose problem gives it the
        largest decision value; one-vs-one: the votes of the pairs, ties
        broken by their confidences (:func:`mklkit._multiclass.ovo_decision`,
        as scikit-learn's ``SVC``).  ``None`` for the test part when there is none.
        """
        import numpy as np

        from .._multiclass import ovo_decision

        assert self.tasks is not None and self.problem is not None
        tasks = self.tasks
        if all(t.rows is None for t in tasks):
            F = np.column_stack([self.train_decision(r) for r in results])
            F_test = None if self.test is None else np.column_stack([self.test_decision(r) for r in results])
            return np.argmax(F, axis=1), None if F_test is None else np.argmax(F_test, axis=1)
        train = TestSide(K=self.problem.K)
        F = np.column_stack([train.decision_function(r, self.bank, rows=t.rows) for r, t in zip(results, tasks)])
        assert self.data.classes is not None
        k = len(self.data.classes)
        F_test = (
            None
            if self.test is None
            else np.column_stack(
                [self.test.decision_function(r, self.bank, rows=t.rows) for r, t in zip(results, tasks)]
            )
        )
        return (
            np.argmax(ovo_decision(F, tasks, k), axis=1),
            None if F_test is None else np.argmax(ovo_decision(F_test, tasks, k), axis=1),
        )

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


_KEEP: Any = object()


def problem_at(
    problem: Problem, *, y: Any = None, K: Any = None, C: float | str | None = None, sample_weight: Any = _KEEP
) -> Problem:
    """``problem`` with other labels, kernels, C (``"auto"``: :func:`~mklkit.pipeline.settings.auto_C`)
    or sample weights (``None``: unweighted; not given: the problem's); its bank shared."""
    import numpy as np

    from ..problem import Problem

    if K is None:
        K = problem.K if problem.representation == "array" else problem.bank
    if isinstance(C, str) and C == "auto":
        C = auto_C(problem)
    return Problem(
        K=K,
        y=problem.y if y is None else np.ascontiguousarray(y, dtype=np.float64),
        loss=problem.loss,
        regularizer=problem.regularizer,
        C=problem.C if C is None else float(C),
        bias=problem.bias,
        kernel_names=problem.kernel_names,
        extra=dict(problem.extra),
        sample_weight=problem.sample_weight if sample_weight is _KEEP else sample_weight,
    )


def _ovo_needs_gram(rep: str) -> None:
    if rep != "array":
        raise PipelineError(
            "problem.multiclass",
            f"one-vs-one problems take row blocks of Gram matrices; the bank is held as a {rep} bank",
            "ovo",
            "ovr, or Gram matrices (kernels.factor: false, no kernels.sharded)",
        )


@dataclass
class _Held:
    """The training bank as :func:`prepare` holds it: ``obj``, ``K`` and ``test`` stay ``None`` until it is built."""

    names: list[str]
    M: int
    rep: str
    memory: dict[str, int] = field(default_factory=dict)
    #: the representation with its settings; ``None`` for given kernels or factors
    chosen: Any = None
    obj: Any = None
    K: Any = None
    test: TestSide | None = None


def _check_labels(d: Data, problem: ProblemSettings) -> tuple[Any, list[Any] | None, bool]:
    """The labels the checks see, the tasks of a multiclass target (or ``None``) and whether they are one-vs-one."""
    tasks = None
    y = d.y_train
    ovo = d.multiclass and problem.multiclass == "ovo"
    if d.multiclass:  # the first one-vs-rest problem's labels stand for all of them in the checks
        import numpy as np

        from .._multiclass import ovo_tasks, ovr_tasks

        assert d.classes is not None
        codes = np.asarray(d.y_train, dtype=np.intp)
        y = ovr_tasks(codes, len(d.classes))[0].y
        tasks = (ovo_tasks if ovo else ovr_tasks)(codes, len(d.classes))
    return y, tasks, ovo


def _held_precomputed(
    d: Data, bank: BankSettings, problem: ProblemSettings, engine: Engine, y: Any, build: bool, engine_key: str
) -> _Held:
    """Given Gram matrices: checked, then (``build``) held as one array with their test side."""
    assert d.K_train is not None
    M = int(d.K_train.shape[0])
    rep = bank.representation.kind
    rep = "array" if rep == "auto" else rep
    if rep != "array":
        raise PipelineError(
            f"kernels.{rep}",
            "precomputed kernels are held as one array",
            getattr(bank, rep).model_dump(),
            "no kernels.sharded or kernels.factor with kernels.precomputed",
        )
    names = list(d.kernel_names or [f"k{m}" for m in range(M)])
    check_support(engine, probe_problem(y, M, problem, sample_weight=d.w_train), engine_key)
    if not build:
        return _Held(names, M, rep)
    kb, test = precomputed_bank(d, bank)
    return _Held(list(kb.names), M, rep, obj=kb, K=kb.K, test=test)


def _held_given_factors(
    d: Data, bank: BankSettings, problem: ProblemSettings, engine: Engine, y: Any, build: bool, engine_key: str
) -> _Held:
    """Given factors: checked, then (``build``) held as the factor bank they make."""
    assert d.factor_starts is not None
    M = int(d.factor_starts.size - 1)
    names = list(d.kernel_names or [f"k{m}" for m in range(M)])
    memory = given_factor_memory(d)
    check_support(engine, probe_problem(y, M, problem, "factor", d.w_train), engine_key)
    if not build:
        return _Held(names, M, "factor", memory)
    obj, test = given_factor_bank(d, bank)
    return _Held(list(obj.factor_map.names), M, "factor", memory, obj=obj, K=obj, test=test)


def _choose(
    specs: list[Any], d: Data, bank: BankSettings, problem: ProblemSettings, engine: Engine, y: Any, ovo: bool
) -> tuple[Any, str]:
    """The representation of an expanded description with its settings, and its kind (logged when chosen)."""
    M = len(specs)
    rep = bank.representation.kind
    chosen = bank.representation
    if ovo and rep != "auto":
        _ovo_needs_gram(rep)
    if rep == "auto":
        chosen, why = choose_representation(  # one-vs-one takes row blocks of Gram matrices
            specs,
            d.n_train,
            d.n_test,
            bank,
            not ovo and _supports(engine, probe_problem(y, M, problem, "factor", d.w_train)),
        )
        rep = chosen.kind
        # said when it approximates (a warning) or factors exactly; Gram matrices are the usual case
        level = (
            logging.WARNING
            if rep == "factor" and chosen.rank is not None
            else logging.INFO
            if rep == "factor"
            else logging.DEBUG
        )
        logger.log(level, "kernels: %s", why)
    elif rep == "factor" and not chosen.settings.model_fields_set - {"refine"}:
        # kernels.factor: true (the defaults), or only refine given: the factors "auto" holds the
        # bank as when it factors, refined as asked
        fixed, why = factor_representation(specs, d.n_train, bank)
        if fixed is not None:  # None: nothing fits, and the factorization says what it needs
            given = "true"
            if "refine" in chosen.settings.model_fields_set:
                given = f"{{refine: {chosen.settings.refine}}}"
                fixed = replace(fixed, settings=fixed.settings.model_copy(update={"refine": chosen.settings.refine}))
            chosen = fixed
            logger.info("kernels: factor: %s: %s", given, why)
    return chosen, rep


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
) -> _Held:
    """A description expanded on the data's columns: its representation chosen, the memory budget and the
    engine checked, then (``build``) the bank built in that representation."""
    bank.representation.check()
    specs = expand_entries(bank, d)
    names = [k.label for k in specs]
    M = len(specs)
    chosen, rep = _choose(specs, d, bank, problem, engine, y, ovo)
    if ovo:
        _ovo_needs_gram(rep)
    memory = check_memory(M, d.n_train, d.n_test, bank, chosen)
    check_support(engine, probe_problem(y, M, problem, rep, d.w_train), engine_key)
    if not build:
        return _Held(names, M, rep, memory, chosen)
    obj, test = build_bank(d, bank, progress, chosen)
    return _Held(
        list(obj.names) if rep != "factor" else list(obj.factor_map.names),
        M,
        rep,
        memory,
        chosen,
        obj=obj,
        K=obj.K if rep == "array" else obj,
        test=test,
    )


def _problem(d: Data, held: _Held, y: Any, problem: ProblemSettings) -> Problem:
    """The problem on the built bank, at the settings' C (a rule's C on the problem itself)."""
    from ..problem import Problem

    prob = Problem(
        K=held.K,
        y=y,
        loss=problem.loss,
        regularizer=problem.regularizer,
        C=1.0 if isinstance(problem.C, str) else problem.C,
        bias=problem.bias,
        kernel_names=held.names,
        sample_weight=d.w_train,
    )
    if isinstance(problem.C, str):  # "auto", and "path"'s prior (the run chooses it: api.solve_prepared)
        prob = problem_at(prob, C=auto_C(prob))
    return prob


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

    Order: expand the description on the data's columns (no Gram matrices),
    check the memory budget (training bank + test kernels), ask the engine
    whether it supports the loss, regularizer and representation on a tiny
    probe problem; then (``build=True``) build the bank in its
    representation, the test side, and the problem.

    Parameters
    ----------
    d : Data
        From :func:`load_data`, :func:`fold`, :func:`array_data` or :func:`gram_data`.
    bank, problem : settings
    engine : Engine
    build : bool
        ``False``: stop after the checks (``mklkit validate``); ``problem`` is ``None``.
    progress : callable or bool, optional
        Progress of the bank build (``KernelBank.build``'s ``progress``).
    engine_key : str
        The key that names the engine in errors (``engine.name``).

    Raises
    ------
    PipelineError
    """
    t0 = time.perf_counter()
    y, tasks, ovo = _check_labels(d, problem)
    if d.precomputed:
        held = _held_precomputed(d, bank, problem, engine, y, build, engine_key)
    elif d.factor_starts is not None:  # precomputed factors: a factor bank as given
        held = _held_given_factors(d, bank, problem, engine, y, build, engine_key)
    else:
        held = _held_described(d, bank, problem, engine, y, ovo, build, progress, engine_key)
    if not build:
        return Prepared(
            d,
            None,
            None,
            None,
            held.names,
            held.M,
            held.rep,
            {"bank_s": 0.0},
            held.memory,
            chosen=held.chosen,
            tasks=tasks,
        )
    t_bank = time.perf_counter() - t0
    logger.debug("built %d kernels (%s) on %d points in %.2f s", len(held.names), held.rep, d.n_train, t_bank)
    prob = _problem(d, held, y, problem)
    check_support(engine, prob, engine_key)
    return Prepared(
        d,
        prob,
        held.obj,
        held.test,
        held.names,
        len(held.names),
        held.rep,
        {"bank_s": t_bank},
        held.memory,
        chosen=held.chosen,
        tasks=tasks,
    )
