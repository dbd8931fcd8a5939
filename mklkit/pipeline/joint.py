r"""The joint multiclass problem of a prepared bank (``multiclass="joint"``, ``docs/multiclass.md``): its
loss, the problem on the training rows, and C chosen on held-out rows along a warm-started path of the
joint engine (:mod:`mklkit.engines.joint`) by the held-out multiclass log-loss, with the rule of
:func:`mklkit.pipeline.heldout.select_C` (the least within one paired standard error nearest the prior)."""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..components.params import ParamError
from ..kernels.factor import FactorBank
from ..plugins import get_registry
from .heldout import HeldoutPath, PathSettings, _Walk, path_decides, prior_path
from .heldout_rows import HeldoutRows, effective_size, split_rows
from .problem_settings import MULTINOMIAL_NAMES

#: The relative duality gap of a joint fit unless ``tol`` is given, per iteration (:func:`joint_tol`): block descent
#: at 1e-2 (wine and digits, 5 splits each: the test accuracy of 1e-3, 6 sweeps instead of 12 and 12 instead of
#: 18-21), FISTA at 1e-3 (on digits, one 80/20 split, FISTA stopped at 1e-2 gave 95.8 % instead of 96.7 %).
JOINT_TOL = {"bcd": 1e-2, "fista": 1e-3}
#: The relative gap of the fits on the held-out path unless ``tol`` is given (then ``tol`` times
#: :attr:`PathSettings.tol_ratio`): the held-out losses that choose C need it (on waveform, paths stopped at
#: 3e-2 chose another C on one split of 5: 85.64 % instead of 85.79 % over the 5).
JOINT_PATH_TOL = 3e-3
#: The most steps (sweeps or FISTA steps) of a joint fit unless ``max_iter`` is given.
JOINT_MAX_ITER = 10000


def joint_tol(base: Any) -> float:
    """The default relative gap of the joint fit of the binary problem ``base`` (:func:`joint_base`'s): that of
    block descent on a factor bank, else FISTA's (:data:`JOINT_TOL`)."""
    return JOINT_TOL["bcd" if isinstance(base.bank, FactorBank) else "fista"]


def joint_loss(spec: Any, owner: str = "") -> Any:
    """The multiclass loss of ``spec``: ``"logistic"`` (or a mapping naming it) is the multinomial loss, the name
    of a registered ``multiclass_loss`` (``"multinomial"``, ``"crammer_singer"``, ``"weston_watkins"``, a
    plugin's; or a mapping with its parameters) that loss, a
    :class:`~mklkit.components.multiclass.MulticlassLoss` instance itself;
    :class:`~mklkit.components.params.ParamError` naming ``loss`` otherwise."""
    from ..components.multiclass import MulticlassLoss

    if isinstance(spec, MulticlassLoss):
        return spec
    name = spec.get("name") if isinstance(spec, dict) else getattr(spec, "name", spec)
    if isinstance(name, str) and name in MULTINOMIAL_NAMES:
        spec, name = MULTINOMIAL_NAMES[1], MULTINOMIAL_NAMES[1]
    reg = get_registry()
    names = [r.name for r in reg.registrations("multiclass_loss")]
    if isinstance(name, str) and name in names and isinstance(spec, (str, dict)):
        try:
            return reg.create("multiclass_loss", spec)
        except ParamError as exc:
            raise ParamError(exc.key, exc.value, exc.allowed, owner=owner) from None
    raise ParamError(
        "loss",
        name if isinstance(name, str) else spec,
        f"'logistic' (the multinomial loss) or a multiclass loss ({', '.join(map(repr, names))}), or a "
        "MulticlassLoss instance, with multiclass='joint'",
        owner=owner,
    )


def class_codes(tasks: list[Any]) -> np.ndarray:
    """The class index of every row from one-vs-rest tasks (the class labelled +1), as float64."""
    return np.argmax(np.stack([np.asarray(t.y) for t in tasks]), axis=0).astype(np.float64)


def joint_problem(base: Any, codes: np.ndarray, n_classes: int, loss: Any, C: float) -> Any:
    """The :class:`~mklkit.engines.joint.JointProblem` on the bank, regularizer, bias and weights of the
    binary problem ``base`` with the class indices ``codes``."""
    from ..engines.joint import JointProblem

    return JointProblem(base.bank, codes, n_classes, loss, base.regularizer, C, base.bias, base.sample_weight)


def joint_C_max(base: Any, codes: np.ndarray, n_classes: int, loss: Any) -> float:
    """``C_max`` of the joint problem (:func:`mklkit.engines.joint.joint_C_max`)."""
    from ..engines.joint import joint_C_max as c_max

    return float(c_max(joint_problem(base, codes, n_classes, loss, 1.0)))


def joint_base(base: Any) -> tuple[Any, str]:
    r"""The binary problem ``base`` on exact factors of its dense bank when they make the joint engine's
    passes cheaper (total rank below half of :math:`MN`, every kernel's relative trace left out at most
    1e-10: :func:`~mklkit.kernels.factorize.dense.exact_factors`), with a line saying what was done; else
    ``base`` itself.  The coefficients of the factored problem are those of the dense one."""
    if base.representation != "array":
        return base, ""
    from ..kernels.factorize.dense import exact_factors

    M, N = base.n_kernels, base.n_samples
    fac = exact_factors(base.K, spectral_bounds=True)  # block descent's curvatures
    if not fac.exact or int(np.sum(fac.ranks)) >= 0.5 * M * N:
        return base, ""
    extra = {k: v for k, v in base.extra.items() if k != "representation"}
    return dataclasses.replace(
        base, K=fac.bank, extra=extra
    ), f"exact factors of the dense bank ({fac.describe()}, {fac.time_s:.2f} s)"


def fit_joint(
    base: Any,
    codes: np.ndarray,
    n_classes: int,
    loss: Any,
    C: Any,
    prior: Callable[[Any], float],
    *,
    tol: float | None = None,
    max_iter: int = JOINT_MAX_ITER,
    warm_start: Any = None,
    callback: Callable[[dict[str, Any]], Any] | None = None,
    progress: Callable[[dict[str, Any]], Any] | None = None,
) -> tuple[Any, HeldoutPath | None, float]:
    r"""The joint problem on the bank of ``base`` solved at ``C``: a number, ``"path"`` (or ``"auto"`` with
    enough rows: :func:`~mklkit.pipeline.heldout.path_decides`) chosen by :func:`joint_held_out_C`, or
    ``"scale"`` (``"auto"`` on fewer rows) given by ``prior(base)``.

    The path's fits stop at the relative gap ``tol`` times :attr:`PathSettings.tol_ratio` (``tol=None``:
    :data:`JOINT_PATH_TOL`), the final fit at ``tol`` (``None``: :func:`joint_tol`), warm-started from
    ``warm_start`` or else from the chosen solution of the path.  Returns the
    :class:`~mklkit.engines.joint.JointResult`, the held-out path (``None`` without one) and the C used.
    """
    from ..engines.joint import solve_joint

    path, start = None, warm_start
    path_tol = JOINT_PATH_TOL if tol is None else float(tol) * PathSettings().tol_ratio
    tol = joint_tol(base) if tol is None else float(tol)
    if isinstance(C, str) and (C == "path" or (C == "auto" and path_decides(base))):  # fewer rows: the prior

        def on_path(problem: Any, warm: Any) -> Any:
            return solve_joint(problem, tol=path_tol, max_iter=max_iter, warm_start=warm)

        path, chosen = joint_held_out_C(base, codes, n_classes, loss, on_path, prior, progress=progress)
        C, start = path.C, start if start is not None else chosen
    elif isinstance(C, str):
        C = prior(base)
    C = float(C)
    problem = joint_problem(base, codes, n_classes, loss, C)
    result = solve_joint(problem, tol=tol, max_iter=max_iter, warm_start=start, callback=callback)
    return result, path, C


def _ratios(c_max_fit: float, prior_fit: float, s: PathSettings) -> tuple[str, float, np.ndarray]:
    """The reference (``"C_max"`` or ``"prior"``), its C on the fitting rows and the path's ratios to it."""
    n = math.floor(-math.log10(s.min_ratio) * s.per_decade + 1e-9)
    if math.isfinite(c_max_fit) and c_max_fit > 0.0:
        return "C_max", c_max_fit, 10.0 ** (-np.arange(1, n + 1) / s.per_decade)
    return "prior", prior_fit, 10.0 ** (np.arange(2 * s.per_decade, -n - 1, -1) / s.per_decade)


def joint_held_out_C(
    base: Any,
    codes: np.ndarray,
    n_classes: int,
    loss: Any,
    solve: Callable[[Any, Any], Any],
    prior: Callable[[Any], float],
    settings: PathSettings | None = None,
    progress: Callable[[dict[str, Any]], Any] | None = None,
) -> tuple[HeldoutPath, Any]:
    """C of the joint problem chosen on held-out rows (stratified by class), and the chosen solution on all
    rows as a warm start (``None`` without one).

    ``base``: the binary problem of the bank on all training rows (its regularizer, bias and weights);
    ``solve(joint_problem, warm_start)`` gives a :class:`~mklkit.engines.joint.JointResult`; ``prior(problem)``
    the prior C of a binary problem (the scale rule).  The held-out rows are scored by the loss (the
    multinomial log-loss) and the error rate as ``metrics`` (accuracy).
    """
    s = settings or PathSettings()
    t_start = time.perf_counter()
    prior_all = float(prior(base))
    codes = np.asarray(codes, dtype=np.float64)
    w_all = base.sample_weight
    fit, held = split_rows(codes, s.held_out, s.seed, stratify=True)
    w_held = np.ones(held.size) if w_all is None else np.asarray(w_all)[held]
    common = dict(prior_C=prior_all, n_fit=int(fit.size), n_held=int(held.size), settings=s)
    if effective_size(w_held) < s.min_held:
        return prior_path(prior_all, w_held, common, t_start), None
    rows = HeldoutRows(base, fit, held)
    y_fit, y_held = codes[fit], codes[held]
    prior_fit = float(prior(rows.problem))
    reference, ref_fit, ratios = _ratios(joint_C_max(rows.problem, y_fit, n_classes, loss), prior_fit, s)
    walk = _Walk("loss", w_held)
    kept: list[Any] = []
    previous = None
    for r in ratios:
        C = float(r * ref_fit)
        t0 = time.perf_counter()
        with warnings.catch_warnings():  # judged on held-out rows; the fit's own solve warns
            warnings.simplefilter("ignore")
            result = solve(joint_problem(rows.problem, y_fit, n_classes, loss, C), previous)
        previous = result
        kept.append(result)
        F = np.column_stack([rows.decision(result.class_result(k)) for k in range(n_classes)])
        per_row = np.asarray(loss.jit.value(y_held, np.ascontiguousarray(F), loss.param_vector), dtype=np.float64)
        wrong = (np.argmax(F, axis=1) != y_held.astype(np.int64)).astype(np.float64)
        walk.record(C, result, (per_row, wrong, 1.0 - float(wrong @ w_held) / float(w_held.sum())), t0)
        if progress is not None:
            progress(walk.progress_record(C, r))
        walk.lowest(s.flat)
        if walk.turned(C, prior_fit, s):
            break
    choice = walk.choose(ref_fit, prior_fit)
    chosen = choice["chosen"]
    ref_all = joint_C_max(base, codes, n_classes, loss) if reference == "C_max" else prior_all
    path = HeldoutPath(
        C=float(choice["ratios"][chosen] * ref_all),
        **walk.arrays(),
        **choice,
        reference=reference,
        stopped=walk.stopped,
        time_s=time.perf_counter() - t_start,
        criterion="loss",
        **common,
    )
    # the chosen solution on all rows: 0 on the held-out rows (the same predictor on the fitting rows)
    pick = kept[chosen]
    coef = np.zeros((pick.coef.shape[0], codes.size, n_classes))
    coef[:, fit, :] = pick.coef
    return path, dataclasses.replace(pick, coef=coef, dual=None, history=[])
