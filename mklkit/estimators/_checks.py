"""The estimators' parameters: each checked in ``fit``, its errors naming the parameter and what it allows."""

from __future__ import annotations

import logging
import math
import numbers
from typing import Any, Mapping, Sequence

import numpy as np

from ..components.base import Component
from ..components.params import ParamError
from ..pipeline import PipelineError, Representation, check_support, parse_bytes
from ..pipeline.bank_settings import FactorSettings, ShardedSettings
from ..plugins import get_registry
from ._defaults import default_bank, feature_kinds

logger = logging.getLogger("mklkit.estimators")

NORMALIZE = ("auto", "trace", "diagonal", "none")
MULTICLASS = ("ovr", "ovo")


def spec_name(spec: Any) -> str | None:
    """The component name a loss/regularizer/engine spec refers to."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping):
        name = spec.get("name")
        return name if isinstance(name, str) else None
    return getattr(spec, "name", None)


def check_C(C: Any, owner: str, key: str = "C", allow_auto: bool = False) -> float:
    allowed = "'auto', 'path', 'scale' or a finite number > 0" if allow_auto else "a finite number > 0"
    if isinstance(C, (bool, np.bool_)) or not isinstance(C, numbers.Real):
        raise ParamError(key, C, allowed, owner=owner)
    value = float(C)
    if not (value > 0.0 and math.isfinite(value)):
        raise ParamError(key, C, allowed, owner=owner)
    return value


def check_choice(value: Any, key: str, choices: Sequence[str], owner: str) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ParamError(key, value, "one of " + ", ".join(repr(c) for c in choices), owner=owner)
    return value


def check_budget(value: Any, owner: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return float(parse_bytes(value))
        except (TypeError, ValueError):
            raise ParamError(
                "memory_budget", value, "None, a number of bytes > 0 or a size such as '512MB' or '4GiB'", owner=owner
            ) from None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not value > 0:
        raise ParamError(
            "memory_budget", value, "None, a number of bytes > 0 or a size such as '512MB' or '4GiB'", owner=owner
        )
    return float(value)


def _updated_spec(spec: Any, updates: Mapping[str, Any]) -> Any:
    """A component spec with some parameters changed, in mapping or instance form."""

    if isinstance(spec, Component):
        return type(spec)(**{**spec.get_params(), **updates})
    if isinstance(spec, str):
        return {"name": spec, **updates}
    if isinstance(spec, Mapping):
        return {**spec, **updates}
    return spec  # invalid; fit reports it


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


def _param_of(key: str) -> str:
    """The estimator parameter of a pipeline key (``kernels.bank[1].width`` -> ``kernels[1].width``)."""
    if key in _PARAMS:
        return _PARAMS[key]
    for prefix, name in (("kernels.bank", "kernels"), ("kernels.preset", "kernels"), ("kernels.factor", "factor")):
        if key.startswith(prefix):
            return name + key[len(prefix) :]
    return key


def is_logistic(est: Any) -> bool:
    return spec_name(est.loss) == "logistic"


class ParameterChecks:
    """The checks of the constructor arguments (a base of :class:`~mklkit.estimators._base.BaseMKL`)."""

    @property
    def _owner(self) -> str:
        return type(self).__name__

    def _precomputed(self) -> bool:
        return isinstance(self.kernels, str) and self.kernels == "precomputed"

    def _components(self) -> tuple[Any, Any, Any]:
        """Loss, regularizer and engine instances; errors say what is allowed."""
        from ..engines.base import Engine

        reg = get_registry()
        owner = self._owner
        loss = reg.create("loss", self.loss)
        if loss.task != self._task:
            ok = [r.name for r in reg.registrations("loss") if r.cls.task == self._task]
            raise ParamError("loss", self.loss, f"a {self._task} loss (one of {', '.join(ok)})", owner=owner)
        regularizer = reg.create("regularizer", self.regularizer)
        engine = reg.create("engine", self.engine)
        if self.engine_params is not None and not isinstance(self.engine_params, Mapping):
            raise ParamError("engine_params", self.engine_params, "None or a mapping of engine options", owner=owner)
        updates = dict(self.engine_params or {})
        if self.tol is not None:
            updates["tol"] = self.tol
        if self.max_iter is not None:
            updates["max_iter"] = self.max_iter
        if updates:
            engine = type(engine)(**{**engine.get_params(), **updates})
        if not isinstance(engine, Engine):  # pragma: no cover - registry guarantees it
            raise ParamError("engine", self.engine, "an mklkit engine", owner=owner)
        return loss, regularizer, engine

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
        """A keyed warning (:class:`~mklkit.kernels.factorize.RankCapWarning`) in this estimator's words, as :meth:`_error`."""
        return f"{self._owner}: {warning.message(key=_param_of(warning.key))}"

    def _representation(self) -> tuple[str, dict[str, Any]]:
        """The bank representation of the ``factor`` / ``scheduler`` parameters: its kind
        (``"auto"``, ``"array"``, ``"sharded"`` or ``"factor"``) and its BankSettings keys."""

        owner = self._owner
        factor, scheduler = getattr(self, "factor", None), getattr(self, "scheduler", None)
        if factor not in (None, False, "auto") and scheduler is not None:
            raise ParamError("scheduler", scheduler, "None when factor is given (one representation)", owner=owner)
        if scheduler is not None:
            return "sharded", {"sharded": ShardedSettings.model_construct(scheduler=scheduler)}
        if isinstance(factor, str) and factor == "auto":
            return "auto", {}
        if factor is None or factor is False:
            return "array", {"factor": False}
        if factor is True:
            factor = {}
        if not isinstance(factor, Mapping) or set(factor) - {"rank", "tol", "method", "seed", "refine"}:
            raise ParamError(
                "factor",
                factor,
                "'auto', None/False (Gram matrices), True or a mapping with keys rank, tol, method, seed, refine",
                owner=owner,
            )
        settings = FactorSettings.model_construct(**dict(factor))
        try:
            Representation("factor", settings).check(root="factor")
        except PipelineError as exc:
            raise ValueError(f"{owner}: {exc}") from None
        return "factor", {"factor": settings}

    def _checked_options(self) -> str:
        """Check ``normalize``, ``memory_budget``, ``bias``, ``standardize`` and ``verbose``; ``normalize`` as given."""
        owner = self._owner
        normalize = check_choice(self.normalize, "normalize", NORMALIZE, owner)
        check_budget(self.memory_budget, owner)
        if not isinstance(self.bias, (bool, np.bool_)):
            raise ParamError("bias", self.bias, "True or False", owner=owner)
        if not (
            isinstance(self.standardize, (bool, np.bool_))
            or (isinstance(self.standardize, str) and self.standardize == "auto")
        ):
            raise ParamError("standardize", self.standardize, "'auto', True or False", owner=owner)
        if (
            isinstance(self.verbose, (bool, np.bool_))
            or not isinstance(self.verbose, numbers.Integral)
            or self.verbose < 0
        ):
            raise ParamError("verbose", self.verbose, "an integer >= 0", owner=owner)
        return normalize

    def _bank_entries(self, n_features: int, X: Any = None) -> Any:
        kernels = self.kernels
        if isinstance(kernels, str):
            if kernels == "auto":
                kinds = None if X is None else feature_kinds(X)
                bank = default_bank(n_features, kinds)
                if kinds is not None:
                    logger.info(
                        "%s: kernels='auto': 7 kernels on all %d features, 3 Gaussian kernels on "
                        "each of %d features, 1 linear kernel on each of %d two-valued ones, none on "
                        "%d constant ones",
                        self._owner,
                        n_features,
                        int(np.sum(kinds == "real")),
                        int(np.sum(kinds == "binary")),
                        int(np.sum(kinds == "constant")),
                    )
                return bank
            from ..kernels import available_presets

            if kernels not in available_presets():
                raise ParamError(
                    "kernels",
                    kernels,
                    "'auto', 'precomputed', a preset name ("
                    + ", ".join(available_presets())
                    + "), a list of bank entries (docs/data_and_kernels.md) or a mapping "
                    "{'preset': name}",
                    owner=self._owner,
                )
            return kernels
        if isinstance(kernels, Mapping):
            return [dict(kernels)]
        if isinstance(kernels, (list, tuple)) and len(kernels) > 0:
            return [dict(e) if isinstance(e, Mapping) else e for e in kernels]
        raise ParamError(
            "kernels",
            kernels,
            "'auto', 'precomputed', a preset name, a non-empty list of bank entries "
            "(docs/data_and_kernels.md) or one entry as a mapping",
            owner=self._owner,
        )

    _COMPONENT_PARAMS = ("loss", "regularizer", "engine")

    def set_params(self, **params: Any) -> "ParameterChecks":
        """Set parameters; ``regularizer__lam=0.2`` sets one component parameter.

        For ``loss``, ``regularizer`` and ``engine``, a key ``<name>__<param>``
        replaces the component spec by one with that parameter changed,
        whatever form it was given in (name, mapping or instance), so that
        ``GridSearchCV`` can search over ``{"regularizer__lam": [...]}``.
        The value is validated by the component in ``fit``.
        """
        nested: dict[str, dict[str, Any]] = {}
        for key in list(params):
            head, sep, sub = key.partition("__")
            if sep and head in self._COMPONENT_PARAMS and "__" not in sub:
                nested.setdefault(head, {})[sub] = params.pop(key)
        super().set_params(**params)
        for head, updates in nested.items():
            setattr(self, head, _updated_spec(getattr(self, head), updates))
        return self
