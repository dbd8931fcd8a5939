"""The estimators' parameters: each checked in ``fit``, its errors naming the parameter and what it allows."""

from __future__ import annotations

import logging
import math
import numbers
from typing import Any, Mapping, Sequence

import numpy as np

from ..components.base import Component
from ..components.params import ParamError
from ..kernels.device import DEVICES, parse_device
from ..pipeline import PipelineError, check_support, parse_bytes
from ..pipeline.bank_settings import FactorSettings, ShardedSettings
from ..pipeline.problem_settings import SECOND_STAGE_REGULARIZER
from ..pipeline.joint import joint_loss
from ..plugins import get_registry
from ._defaults import default_bank, feature_kinds

logger = logging.getLogger("mklkit.estimators")

NORMALIZE = ("auto", "trace", "diagonal", "none")
MULTICLASS = ("auto", "ovr", "ovo", "joint")
#: The estimators' default regularizer (replaced by ``uniform`` with a weighting).
DEFAULT_REGULARIZER = "elasticnet"
#: Estimator parameter of each pipeline key (errors name the parameter).
_PARAMS = {
    "kernels.memory_budget": "memory_budget",
    "kernels.normalize": "normalize",
    "kernels.precomputed": "X",
    "kernels.sharded.scheduler": "scheduler",
    "engine.name": "engine",
    "data.standardize": "standardize",
    "problem.loss": "loss",
}
_PREFIXES = (("kernels.bank", "kernels"), ("kernels.preset", "kernels"), ("kernels.factor", "factor"))


def spec_name(spec: Any) -> str | None:
    """The component name a loss/regularizer/engine spec refers to."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping):
        name = spec.get("name")
        return name if isinstance(name, str) else None
    return getattr(spec, "name", None)


def multiclass_mode(est: Any) -> str:
    """The multiclass mode an estimator's ``multiclass`` stands for: ``"auto"`` is ``"joint"`` where the joint
    problem applies (a loss with a multinomial form, ``engine="auto"``, no weighting), else ``"ovr"``; any
    other value is itself."""
    mode = getattr(est, "multiclass", None)
    if mode != "auto":
        return mode
    if spec_name(est.engine) != "auto" or getattr(est, "weighting", None) is not None or getattr(est, "device", None):
        return "ovr"
    try:
        joint_loss(est.loss)
    except ParamError:
        return "ovr"
    return "joint"


def is_logistic(est: Any) -> bool:
    """Whether the fit gives class probabilities: the logistic loss, or with ``multiclass="joint"`` the
    multinomial loss (or a multiclass loss with ``has_proba``)."""
    if multiclass_mode(est) == "joint" and (
        spec_name(est.loss) == "multinomial" or getattr(est.loss, "has_proba", False)
    ):
        return True
    return spec_name(est.loss) == "logistic"


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def check_C(C: Any, owner: str, key: str = "C", allow_auto: bool = False) -> float:
    allowed = "'auto', 'path', 'scale' or a finite number > 0" if allow_auto else "a finite number > 0"
    if _is_bool(C) or not isinstance(C, numbers.Real) or not (float(C) > 0.0 and math.isfinite(float(C))):
        raise ParamError(key, C, allowed, owner=owner)
    return float(C)


def check_choice(value: Any, key: str, choices: Sequence[str], owner: str) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ParamError(key, value, "one of " + ", ".join(repr(c) for c in choices), owner=owner)
    return value


def check_budget(value: Any, owner: str) -> float | None:
    """``memory_budget`` in bytes, read by the pipeline's :func:`~mklkit.pipeline.parse_bytes`."""
    try:
        return None if value is None else float(parse_bytes(value))
    except ValueError:
        allowed = "None, a number of bytes > 0 or a size such as '512MB' or '4GiB'"
        raise ParamError("memory_budget", value, allowed, owner=owner) from None


def _param_of(key: str) -> str:
    """The estimator parameter of a pipeline key (``kernels.bank[1].width`` -> ``kernels[1].width``)."""
    if key in _PARAMS:
        return _PARAMS[key]
    for prefix, name in _PREFIXES:
        if key.startswith(prefix):
            return name + key[len(prefix) :]
    return key


class ParameterChecks:
    """The checks of the constructor arguments (a base of :class:`~mklkit.estimators._base.BaseMKL`)."""

    @property
    def _owner(self) -> str:
        return type(self).__name__

    def _precomputed(self) -> bool:
        return isinstance(self.kernels, str) and self.kernels == "precomputed"

    def _components(self) -> tuple[Any, Any, Any]:
        """Loss, regularizer and engine instances; errors say what is allowed."""
        reg = get_registry()
        loss_spec = self.loss
        if multiclass_mode(self) == "joint":  # the multiclass loss checked; binary problems: logistic
            joint_loss(self.loss, self._owner)
            loss_spec = "logistic"
        loss = reg.create("loss", loss_spec)
        if loss.task != self._task:
            ok = ", ".join(r.name for r in reg.registrations("loss") if r.cls.task == self._task)
            raise ParamError("loss", self.loss, f"a {self._task} loss (one of {ok})", owner=self._owner)
        regularizer = reg.create("regularizer", self._regularizer_spec())
        if self._weighting() is not None:
            regularizer = self._second_stage_regularizer(regularizer)
        engine = reg.create("engine", self._engine_spec())
        if self.engine_params is not None and not isinstance(self.engine_params, Mapping):
            raise ParamError(
                "engine_params", self.engine_params, "None or a mapping of engine options", owner=self._owner
            )
        given = {"tol": self.tol, "max_iter": self.max_iter, "device": getattr(self, "device", None)}
        updates = {**(self.engine_params or {}), **{k: v for k, v in given.items() if v is not None}}
        if updates:
            engine = type(engine)(**{**engine.get_params(), **updates})
        return loss, regularizer, engine

    def _engine_spec(self) -> Any:
        """The engine to create: ``engine`` as given, or ``apg`` for a ``device`` (which ``engine`` must allow)."""
        device = getattr(self, "device", None)
        if device is None:
            return self.engine
        if parse_device(device) is None:
            raise ParamError("device", device, f"None, {DEVICES}", owner=self._owner)
        if spec_name(self.engine) not in ("auto", "apg"):
            raise ParamError(
                "engine",
                self.engine,
                "'auto' or 'apg' with device (the engine that runs on a device)",
                owner=self._owner,
            )
        return "apg" if spec_name(self.engine) == "auto" else self.engine

    def _regularizer_spec(self) -> Any:
        """The regularizer to create: ``regularizer`` as given (an estimator may resolve its own defaults)."""
        return self.regularizer

    def _weighting(self) -> Any:
        """The ``weighting`` instance (``None`` without one); refused where it does not apply to the task."""
        spec = getattr(self, "weighting", None)
        if spec is None:
            return None
        reg = get_registry()
        weighting = reg.create("weighting", spec)
        if not weighting.applies_to(self._task):
            ok = ", ".join(r.name for r in reg.registrations("weighting") if self._task in r.cls.tasks)
            raise ParamError(
                "weighting", spec, f"None or a weighting for {self._task} (one of {ok})", owner=self._owner
            )
        return weighting

    def _second_stage_regularizer(self, regularizer: Any) -> Any:
        """With a weighting the regularizer is ``uniform``: the default (``elasticnet``) or ``uniform`` given, any
        other refused (naming both parameters)."""
        given = self.regularizer
        default = isinstance(given, str) and given == DEFAULT_REGULARIZER
        if not (default or regularizer.name == SECOND_STAGE_REGULARIZER):
            raise ParamError(
                "regularizer",
                given,
                f"{DEFAULT_REGULARIZER!r} (the default) or {SECOND_STAGE_REGULARIZER!r} with weighting="
                f"{spec_name(self.weighting)!r} (the second stage of a two-stage method is the uniform combination)",
                owner=self._owner,
            )
        return get_registry().create("regularizer", SECOND_STAGE_REGULARIZER)

    def _check_support(self, engine: Any, problem: Any) -> None:
        """The pipeline's engine check (:func:`mklkit.pipeline.check_support`), naming the ``engine`` parameter."""
        try:
            check_support(engine, problem)
        except PipelineError as exc:
            raise self._error(exc) from None

    def _error(self, exc: Any) -> ValueError:
        """A :class:`~mklkit.pipeline.PipelineError` as this estimator's one-line error (its parameter named)."""
        return ValueError(f"{self._owner}: {exc.message(key=_param_of(exc.key))}")

    def _warning_text(self, warning: Any) -> str:
        """A keyed warning (:class:`~mklkit.kernels.factorize.RankCapWarning`) in this estimator's words."""
        return f"{self._owner}: {warning.message(key=_param_of(warning.key))}"

    def _representation(self) -> tuple[str, dict[str, Any]]:
        """The bank representation of ``factor`` / ``scheduler``: its kind (``"auto"``, ``"array"``, ``"sharded"``
        or ``"factor"``) and its BankSettings keys."""
        owner = self._owner
        factor, scheduler = getattr(self, "factor", None), getattr(self, "scheduler", None)
        if factor not in (None, False, "auto") and scheduler is not None:
            raise ParamError("scheduler", scheduler, "None when factor is given (one representation)", owner=owner)
        if scheduler is not None:
            return "sharded", {"sharded": ShardedSettings.model_construct(scheduler=scheduler)}
        device = getattr(self, "device", None)
        if isinstance(factor, str) and factor == "auto":
            if device is not None:  # the engine on a device takes factors
                return "factor", {"factor": FactorSettings.model_construct()}
            return "auto", {}
        if factor is None or factor is False:
            if device is not None:
                raise ParamError("factor", factor, "'auto', True or a mapping with device (factors)", owner=owner)
            return "array", {"factor": False}
        factor = {} if factor is True else factor
        if not isinstance(factor, Mapping) or set(factor) - set(FactorSettings.model_fields):
            raise ParamError(
                "factor",
                factor,
                "'auto', None/False (Gram matrices), True or a mapping with keys rank, tol, method, seed, refine",
                owner=owner,
            )
        return "factor", {"factor": FactorSettings.model_construct(**dict(factor))}  # checked by pipeline.prepare

    def _checked_options(self) -> str:
        """Check ``normalize``, ``memory_budget``, ``bias``, ``standardize`` and ``verbose``; ``normalize`` as given."""
        owner = self._owner
        normalize = check_choice(self.normalize, "normalize", NORMALIZE, owner)
        check_budget(self.memory_budget, owner)
        if not _is_bool(self.bias):
            raise ParamError("bias", self.bias, "True or False", owner=owner)
        if not (_is_bool(self.standardize) or (isinstance(self.standardize, str) and self.standardize == "auto")):
            raise ParamError("standardize", self.standardize, "'auto', True or False", owner=owner)
        if _is_bool(self.verbose) or not isinstance(self.verbose, numbers.Integral) or self.verbose < 0:
            raise ParamError("verbose", self.verbose, "an integer >= 0", owner=owner)
        return normalize

    def _bank_entries(self, n_features: int, X: Any) -> Any:
        """The bank's entries of ``kernels`` (``"auto"``: :func:`default_bank` of ``X``'s feature kinds)."""
        from ..kernels import available_presets

        kernels = self.kernels
        if isinstance(kernels, str) and kernels == "auto":
            kinds = feature_kinds(X)
            logger.info(
                f"{self._owner}: kernels='auto': 7 kernels on all {n_features} features, 3 Gaussian kernels on each "
                f"of {np.sum(kinds == 'real')} features, 1 linear kernel on each of {np.sum(kinds == 'binary')} "
                f"two-valued ones, none on {np.sum(kinds == 'constant')} constant ones"
            )
            return default_bank(n_features, kinds)
        if isinstance(kernels, str) and kernels in available_presets():
            return kernels
        if isinstance(kernels, str):
            allowed = (
                f"'auto', 'precomputed', a preset name ({', '.join(available_presets())}), a list of bank entries "
                "(docs/data_and_kernels.md) or a mapping {'preset': name}"
            )
            raise ParamError("kernels", kernels, allowed, owner=self._owner)
        if isinstance(kernels, Mapping):
            return [dict(kernels)]
        if isinstance(kernels, (list, tuple)) and len(kernels) > 0:
            return [dict(e) if isinstance(e, Mapping) else e for e in kernels]
        raise ParamError(
            "kernels",
            kernels,
            "'auto', 'precomputed', a preset name, a non-empty list of bank entries (docs/data_and_kernels.md) or "
            "one entry as a mapping",
            owner=self._owner,
        )

    def set_params(self, **params: Any) -> "ParameterChecks":
        """Set parameters; ``regularizer__lam=0.2`` sets one parameter of a component.

        For ``loss``, ``regularizer``, ``engine`` and ``weighting``, a key ``<name>__<param>`` replaces the component spec by one
        with that parameter changed, whatever form it was given in (name, mapping or instance), so that
        ``GridSearchCV`` can search over ``{"regularizer__lam": [...]}``; ``fit`` validates the value.
        """
        nested: dict[str, dict[str, Any]] = {}
        for key in list(params):
            head, sep, sub = key.partition("__")
            if sep and head in ("loss", "regularizer", "engine", "weighting") and "__" not in sub:
                nested.setdefault(head, {})[sub] = params.pop(key)
        super().set_params(**params)
        for head, updates in nested.items():
            spec = getattr(self, head)
            if isinstance(spec, Component):
                spec = type(spec)(**{**spec.get_params(), **updates})
            elif isinstance(spec, str):
                spec = {"name": spec, **updates}
            elif isinstance(spec, Mapping):
                spec = {**spec, **updates}
            setattr(self, head, spec)  # an invalid spec is kept: fit reports it
        return self
