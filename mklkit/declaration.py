"""One checker of what a component declares, for the registry (on a class) and the conformance kit (on an
instance): each problem is one phrase saying what is wrong and what is allowed.  Structure only: whether
the mathematics holds is the conformance kit's identities.
"""

from __future__ import annotations

import math
import pickle
import re
from typing import Any

from .components.params import Param, ParamError

#: Component kinds, in listing order.
KINDS: tuple[str, ...] = ("loss", "regularizer", "kernel", "engine", "weighting", "multiclass_loss")

_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]*")


def is_jitted(fn: Any) -> bool:
    """Whether ``fn`` is a numba ``@njit`` dispatcher."""
    from numba.core.dispatcher import Dispatcher

    return isinstance(fn, Dispatcher)


def base_class(kind: str) -> type:
    """The base class of a component kind."""
    if kind in ("loss", "regularizer"):
        from .components.base import Loss, Regularizer

        return Loss if kind == "loss" else Regularizer
    if kind == "engine":
        from .engines.base import Engine

        return Engine
    if kind == "weighting":
        from .weighting.base import Weighting

        return Weighting
    if kind == "multiclass_loss":
        from .components.multiclass import MulticlassLoss

        return MulticlassLoss
    from .kernels.functions import KernelFunction

    return KernelFunction


#: Each group of kernel methods in words, and its signatures, for messages.
_GROUPS = {
    "loss": ("a loss", "(y, z, params); conj_lower and conj_upper (y, params)"),
    "constrained": ("the constrained form (SpicyMKL eq. 33)", "(y, u, ut, params)"),
    "regularizer": ("a regularizer", "(x, C, params); weight and penalty (x, params)"),
    "bregman": ("a Bregman form", "(d, params); bregman_d0 (params)"),
    "multiclass_loss": ("a multiclass loss", "(y, F, params): class indices, outputs (N, K)"),
}


def _kernel_groups(cls: type) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """The kernel methods a class may write, by group: group -> (names, required names).  A loss's
    constrained form (also required by ``smooth_conjugate=False``) and a regularizer's Bregman form are
    all or nothing."""
    kind = getattr(cls, "kind", None)
    base = base_class(kind) if kind in ("loss", "regularizer", "multiclass_loss") else None
    if base is None or not issubclass(cls, base):
        return {}
    if kind == "multiclass_loss":
        return {"multiclass_loss": (base.KERNELS, base.KERNELS)}
    if kind == "loss":
        groups = {"loss": (base.KERNELS, base.REQUIRED_KERNELS)}
        cons = base.CONSTRAINED_KERNELS
        given = any(getattr(cls, n, None) is not None for n in cons)
        needed = getattr(cls, "smooth_conjugate", True) is False
        groups["constrained"] = (cons, cons if (given or needed) else ())
        return groups
    breg = base.BREGMAN_KERNELS
    given = any(getattr(cls, n, None) is not None for n in breg)
    return {"regularizer": (base.KERNELS, base.REQUIRED_KERNELS), "bregman": (breg, breg if given else ())}


def _missing_problems(cls: type) -> list[str]:
    """The required kernel methods ``cls`` lacks, one problem per group."""
    problems = []
    for group, (_, required) in _kernel_groups(cls).items():
        missing = [n for n in required if getattr(cls, n, None) is None]
        if not missing:
            continue
        what, signatures = _GROUPS[group]
        unsmooth = group == "constrained" and getattr(cls, "smooth_conjugate", True) is False
        problems.append(
            f"{'has smooth_conjugate=False but ' if unsmooth else ''}lacks the kernel method"
            f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}: {what} needs {', '.join(required)}, each a "
            f"@kernel method of {signatures} (mklkit.components.base.kernel)"
        )
    return problems


def unjitted_problem(component: Any) -> str | None:
    """The kernel methods of ``component`` that are not numba ``@njit`` functions, as one problem; ``None``
    when every one is (missing ones are :func:`declaration_problems`)."""
    cls = component if isinstance(component, type) else type(component)
    methods = [(name, getattr(cls, name, None)) for names, _ in _kernel_groups(cls).values() for name in names]
    bad = [(name, type(fn).__name__) for name, fn in methods if fn is not None and not is_jitted(fn)]
    if not bad:
        return None
    return (
        f"{', '.join(n for n, _ in bad)} must be numba-jitted functions (@kernel methods, "
        "mklkit.components.base.kernel: njit(cache=True); engines call them from jitted "
        f"loops); got {', '.join(k for _, k in bad)}"
    )


def _params_problems(cls: type) -> list[str]:
    params = getattr(cls, "params", ())
    if not isinstance(params, tuple) or not all(isinstance(p, Param) for p in params):
        return ["'params' must be a tuple of mklkit.components.params.Param"]
    problems = []
    names = [p.name for p in params]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        problems.append(f"declares parameter(s) {', '.join(dupes)} twice")
    for p in params:
        if not p.name.isidentifier():
            problems.append(f"parameter name {p.name!r} must be a Python identifier")
        if not p.required:
            try:
                p.validate(p.default)
            except ParamError:
                problems.append(
                    f"parameter {p.name!r} has default {p.default!r}, which its own "
                    f"declaration does not allow ({p.allowed()})"
                )
    return problems


def _flag_problems(owner: Any, attrs: tuple[str, ...], allow_property: bool) -> list[str]:
    values = [(attr, getattr(owner, attr, None)) for attr in attrs]
    return [
        f"{attr} must be True or False; got {v!r}"
        for attr, v in values
        if not (isinstance(v, bool) or (allow_property and isinstance(v, property)))
    ]


def _loss_problems(cls: type, obj: Any) -> list[str]:
    from .components.base import CLASSIFICATION, REGRESSION

    owner = cls if obj is None else obj
    problems: list[str] = []
    task = getattr(owner, "task", None)
    if task not in (CLASSIFICATION, REGRESSION):
        problems.append(f"task must be {CLASSIFICATION!r} or {REGRESSION!r}; got {task!r}")
    problems += _flag_problems(owner, ("smooth_conjugate", "smooth_primal", "linear_conjugate"), obj is None)
    if getattr(cls, "constrained", None) is not None:
        for attr, least in (("n_cons", 1), ("n_aux", 0)):
            value = getattr(owner, attr, None)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                problems.append(f"{attr} must be an integer >= {least}; got {value!r}")
    return problems


def _regularizer_problems(cls: type, obj: Any) -> list[str]:
    from .components.base import WeightNorm

    owner = cls if obj is None else obj
    flags = ("separable",) if obj is None else ("separable", "smooth_conjugate", "sparse", "tikhonov_form")
    problems = _flag_problems(owner, flags, obj is None)
    wn = getattr(owner, "weight_norm", None)
    if not (wn is None or isinstance(wn, WeightNorm) or (obj is None and isinstance(wn, property))):
        problems.append(f"weight_norm must be a WeightNorm or None; got {type(wn).__name__}")
    elif isinstance(wn, WeightNorm):
        ok_p = isinstance(wn.p, (int, float)) and math.isfinite(wn.p) and wn.p >= 1.0
        ok_lam = wn.lam is None or (isinstance(wn.lam, (int, float)) and wn.lam > 0 and math.isfinite(wn.lam))
        if not (ok_p and ok_lam):
            problems.append(f"weight_norm must have p >= 1 and lam > 0 or None; got {wn!r}")
    if obj is not None:
        for C in (0.1, 1.0, 3.0):
            try:
                rad = obj.conj_radius(C)
            except Exception as exc:  # noqa: BLE001 - a plugin's failure is the problem
                problems.append(f"conj_radius({C}) raised {type(exc).__name__}: {exc}")
                break
            if not isinstance(rad, float) or not rad > 0:
                problems.append(f"conj_radius({C}) must be a float > 0 (inf if unbounded); got {rad!r}")
            elif obj.smooth_conjugate is True and math.isfinite(rad):
                problems.append(f"smooth_conjugate is True but conj_radius({C}) = {rad} is finite")
    return problems


def _engine_problems(cls: type) -> list[str]:
    from .engines.base import Engine, Requires

    problems = []
    if cls.solve is Engine.solve and getattr(cls, "_solve", None) is Engine._solve:
        problems.append(
            "does not implement solve(problem, callback) (or the skeleton's _solve(problem, run, warm_start))"
        )
    requires = getattr(cls, "requires", None)
    if not isinstance(requires, Requires):
        problems.append(f"'requires' must be a mklkit.engines.base.Requires; got {type(requires).__name__}")
    return problems


def _weighting_problems(cls: type) -> list[str]:
    """``tasks``, ``scale`` and ``weights`` (mklkit.weighting.base)."""
    from .components.base import CLASSIFICATION, REGRESSION
    from .weighting.base import SCALE_BEHAVIOURS, Weighting

    problems = []
    tasks = getattr(cls, "tasks", None)
    if not (isinstance(tasks, tuple) and tasks and set(tasks) <= {CLASSIFICATION, REGRESSION}):
        problems.append(f"tasks must be a non-empty tuple of {CLASSIFICATION!r} and {REGRESSION!r}; got {tasks!r}")
    scale = getattr(cls, "scale", None)
    if scale not in SCALE_BEHAVIOURS:
        problems.append(f"scale must be one of {', '.join(map(repr, SCALE_BEHAVIOURS))}; got {scale!r}")
    if getattr(cls, "weights", None) is Weighting.weights:
        problems.append("does not implement weights(bank, y) (the kernel weights, shape (M,))")
    return problems


def _kernel_function_problems(cls: type, base: type) -> list[str]:
    """``uses`` + ``from_base``, or an own ``gram`` (mklkit.kernels.functions)."""
    from .kernels.functions import BASES

    uses = getattr(cls, "uses", None)
    if uses is None:
        if cls.gram is base.gram:
            return [f"must override gram() or set 'uses' to one of {', '.join(map(repr, BASES))}"]
        return []
    if uses not in BASES:
        return [f"'uses' must be one of {', '.join(map(repr, BASES))} or None; got {uses!r}"]
    if getattr(cls, "from_base", None) is getattr(base, "from_base", None):
        return [f"sets uses={uses!r} but does not implement from_base()"]
    return []


def _instance_problems(obj: Any) -> list[str]:
    import numpy as np

    problems = []
    try:
        pv = obj.param_vector
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        problems.append(f"param_vector raised {type(exc).__name__}: {exc}")
    else:
        if not (isinstance(pv, np.ndarray) and pv.dtype == np.float64 and pv.ndim == 1 and pv.flags.c_contiguous):
            problems.append("param_vector must be a 1-d C-contiguous float64 array")
    try:
        clone = pickle.loads(pickle.dumps(obj))
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        problems.append(f"pickling failed: {type(exc).__name__}: {exc}")
    else:
        if clone != obj:
            problems.append(f"pickle round trip changed the component: {clone!r} != {obj!r}")
    return problems


def declaration_problems(component: Any, kind: str | None = None) -> list[str]:
    """What is wrong with the declaration of ``component``; empty when nothing is.

    A class is checked as the registry sees it (properties not evaluated); an instance also has its
    properties, ``conj_radius`` (regularizers), ``param_vector`` and a pickle round trip checked.  ``kind``
    defaults to ``component.kind``.  One phrase per problem, in declaration order; the numba check of
    the kernel methods is :func:`unjitted_problem`.
    """
    obj = None if isinstance(component, type) else component
    cls = component if obj is None else type(component)
    kind = getattr(cls, "kind", None) if kind is None else kind
    if kind not in KINDS:
        return [f"kind must be one of {', '.join(map(repr, KINDS))}; got {kind!r}"]
    base = base_class(kind)
    if not issubclass(cls, base):
        return [f"must be a subclass of {base.__module__}.{base.__qualname__}"]
    problems: list[str] = []
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        problems.append("lacks 'name' (a non-empty string)")
    elif not _NAME_RE.fullmatch(name):
        problems.append(f"name {name!r} is not allowed: use letters, digits, '_', '-' or '.', starting with a letter")
    description = getattr(cls, "description", None)
    if not isinstance(description, str) or not description.strip():
        problems.append("lacks 'description' (a non-empty string)")
    problems += _params_problems(cls)
    problems += _missing_problems(cls)
    if kind == "loss":
        problems += _loss_problems(cls, obj)
    elif kind == "regularizer":
        problems += _regularizer_problems(cls, obj)
    elif kind == "engine":
        problems += _engine_problems(cls)
    elif kind == "weighting":
        problems += _weighting_problems(cls)
    elif kind == "multiclass_loss":
        problems += _flag_problems(cls if obj is None else obj, ("smooth_primal", "has_proba"), obj is None)
    else:
        problems += _kernel_function_problems(cls, base)
    if obj is not None and kind in ("loss", "regularizer", "weighting", "multiclass_loss"):
        problems += _instance_problems(obj)
    return problems
