"""The problem's settings (``problem:``, ``engine:``): components by name or mapping, and C."""

from __future__ import annotations

import math
from typing import Annotated, Any, Callable, Literal, Mapping

from pydantic import Field, PlainSerializer, PlainValidator, WithJsonSchema, model_validator

from ..components.params import ParamError, did_you_mean
from ..plugins import UnknownComponentError, get_registry
from .errors import PipelineError
from .settings import DEFAULTS, Settings, absent


def component_dict(comp: Any) -> dict[str, Any]:
    """A component as its spec: ``{"name": ..., **params}``."""
    return {"name": comp.name, **comp.get_params()}


def _component(kind: str, default: Any = None) -> Callable[[Any], Any]:
    """A validator that makes a component from ``name``, ``{name: ..., param: value}`` or an instance; its
    ``Param`` declarations validate its parameters, errors keyed relative to it (``lam``)."""

    def make(spec: Any) -> Any:
        from ..components.base import Component

        if isinstance(spec, Component):
            return spec
        reg = get_registry()
        names = reg.names(kind)
        if default is not None:
            if spec is None:
                spec = {"name": default}
            elif isinstance(spec, str):
                spec = {"name": spec}
            elif not isinstance(spec, Mapping):
                raise PipelineError(
                    "", "must be a mapping", spec, f"a mapping {{name: {kind.upper()}, option: value, ...}}"
                )
            elif spec.get("name") is None:
                spec = {**spec, "name": default}
        if isinstance(spec, str):
            name, name_key = spec, ""
        elif isinstance(spec, Mapping):
            if spec.get("name") is None:
                raise PipelineError("name", f"a {kind} mapping needs a name", dict(spec), ", ".join(names))
            name, name_key = spec["name"], "name"
            if not isinstance(name, str):
                raise PipelineError(name_key, "invalid value", name, ", ".join(names))
        else:
            raise PipelineError(
                "",
                f"invalid {kind}",
                spec,
                f"a {kind} name ({', '.join(names)}) or a mapping {{name: ..., param: value}}",
            )
        try:
            cls = reg.get(kind, name)
        except UnknownComponentError:
            hint = did_you_mean(name, names)
            problem = f"unknown {kind}{hint}"
            if not hint:
                problem += f" (no installed plugin provides {kind} {name!r}"
                if reg.broken:
                    problem += "; broken plugins: " + ", ".join(f"{b.name} ({b.message})" for b in reg.broken)
                problem += ")"
            raise PipelineError(name_key, problem, name, ", ".join(names) or "none registered") from None
        try:
            return reg.create(kind, dict(spec) if isinstance(spec, Mapping) else spec)
        except ParamError as e:
            declared = {p.name: p for p in getattr(cls, "params", ())}
            if e.key not in declared and e.key != "name":
                raise PipelineError(e.key, f"unknown parameter of {kind} {name!r}", e.key, e.allowed) from None
            if e.value is None and e.key in declared and declared[e.key].required:
                raise PipelineError(
                    e.key, f"missing required parameter of {kind} {name!r}", allowed=declared[e.key].allowed()
                ) from None
            raise PipelineError(e.key, e.problem or "invalid value", e.value, e.allowed) from None
        except (TypeError, ValueError) as e:
            raise PipelineError("", f"cannot create {kind} {name!r}: {e}", spec) from None

    return make


def _component_type(kind: str, default: Any = None) -> Any:
    """The annotated type of a component field: made by :func:`_component`, dumped as its spec."""
    return Annotated[
        Any,
        PlainValidator(_component(kind, default)),
        PlainSerializer(component_dict),
        WithJsonSchema({"x-component": kind}),
    ]


LossField = _component_type("loss")
RegularizerField = _component_type("regularizer")
EngineField = _component_type("engine", DEFAULTS["engine.name"])
WeightingField = _component_type("weighting")
MulticlassLossField = _component_type("multiclass_loss")
#: The regularizer of a two-stage method's second stage (:mod:`mklkit.pipeline.weighting`).
SECOND_STAGE_REGULARIZER = "uniform"


#: The binary loss names that stand for the multinomial loss with ``multiclass="joint"``
#: (:func:`mklkit.pipeline.joint.joint_loss`).
MULTINOMIAL_NAMES = ("logistic", "multinomial")

#: ``c`` of :func:`auto_C` per task: the best scale of a grid on the bundled sets (docs/api.md, "C='auto'").
AUTO_C_SCALE: dict[str, float] = {"classification": 1.0, "regression": 6.0}

#: The names ``problem.C`` (and the estimators' ``C``) takes besides a number.
C_NAMES = ("auto", "path", "scale")
_C_ALLOWED = ", ".join(C_NAMES) + " or a finite number > 0"


def _C(value: Any) -> float | str:
    """``problem.C``: one of :data:`C_NAMES` or a finite number > 0."""
    if isinstance(value, str) and value.strip() in C_NAMES:
        return value.strip()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise PipelineError("", "invalid value", value, _C_ALLOWED)
    return float(value)


#: ``problem.C`` in the JSON Schema: a number > 0 or the string ``auto``, ``path`` or ``scale``.
CValue = Annotated[
    Any,
    PlainValidator(_C),
    WithJsonSchema({"type": ["number", "string"], "exclusiveMinimum": 0, "pattern": "^(auto|path|scale)$"}),
]


def auto_C(problem: Any, key: str = "problem.C") -> float:
    r"""The C of ``C = "scale"`` (and of ``"auto"`` without a held-out path): :math:`c\sqrt{\bar d}`, with
    :math:`\bar d = \sum_m \mathrm{tr}K_m / (MN)` the (weighted) mean diagonal of the training kernels,
    what factors leave out included, and ``c`` of :data:`AUTO_C_SCALE`.

    Raises
    ------
    PipelineError
        At ``key`` when the kernels' mean diagonal is not positive.
    """
    import numpy as np

    N = int(problem.n_samples)
    w = getattr(problem, "sample_weight", None)
    if w is not None and problem.representation == "array":
        diag = np.einsum("mii->mi", problem.K)
        mean_diag = float(np.sum(diag @ w)) / (diag.shape[0] * float(np.sum(w))) if diag.size else 0.0
    elif w is not None and hasattr(problem.bank, "weighted_trace"):  # a factor bank
        tr = np.asarray(problem.bank.weighted_trace(w), dtype=np.float64)
        # the trace the factors leave out, spread evenly over the rows
        tr = tr + np.asarray(getattr(problem.bank, "trace_error", 0.0), dtype=np.float64) * float(np.mean(w))
        mean_diag = float(tr.sum()) / (tr.size * float(np.sum(w))) if tr.size else 0.0
    else:
        tr = np.asarray(problem.bank.trace(), dtype=np.float64)
        tr = tr + np.asarray(getattr(problem.bank, "trace_error", 0.0), dtype=np.float64)
        mean_diag = float(tr.sum()) / (tr.size * N) if tr.size and N else 0.0
    if not (mean_diag > 0.0 and math.isfinite(mean_diag)):
        raise PipelineError(
            key, f"'auto' needs kernels with a positive mean diagonal (got {mean_diag!r})", "auto", "a number > 0"
        )
    return AUTO_C_SCALE.get(problem.loss.task, 1.0) * math.sqrt(mean_diag)


class ProblemSettings(Settings):
    """Loss, regularizer (validated component instances), C, bias (the spec's ``problem:``)."""

    loss: LossField = Field(description="a loss: its name, or a mapping with name and parameters")
    regularizer: RegularizerField = Field(
        DEFAULTS["problem.regularizer"],
        validate_default=True,
        description="a regularizer: its name, or a mapping with name and parameters",
    )
    C: CValue = Field(
        DEFAULTS["problem.C"],
        description="regularization constant: a number > 0; path (chosen "
        "on held-out rows); scale (the root mean diagonal of the training kernels, x 6 for "
        "regression losses); or auto (path with at least 2,500 training rows, else scale)",
    )
    weighting: WeightingField = Field(
        None,
        exclude_if=lambda v: v is None,
        description="a two-stage method: kernel weights learnt first by a weighting (its name, or a mapping with "
        "name and parameters), then the uniform regularizer on the weighted bank (docs/two_stage.md)",
    )
    bias: bool = Field(DEFAULTS["problem.bias"], description="fit an unregularized offset")
    nu: float | None = absent(
        "with the one_class loss and the l1 regularizer: the fraction nu in (0, 1] to reach (C is found for it; "
        "docs/one_class.md)"
    )
    multiclass_loss: MulticlassLossField = absent(
        "with multiclass joint: the multiclass loss (set from problem.loss when it names one; docs/multiclass.md)"
    )
    multiclass: Literal["ovr", "ovo", "joint"] = Field(
        DEFAULTS["problem.multiclass"],
        exclude_if=lambda v: v == "ovr",
        description="more than two "
        "classes: one-vs-rest (one problem per class), one-vs-one "
        "(one per pair of classes, on their rows; Gram matrices only) or joint (one problem on all rows with the "
        "multinomial loss and one kernel weighting for all classes; loss logistic or multinomial, engine auto; "
        "docs/multiclass.md)",
    )

    @model_validator(mode="before")
    @classmethod
    def _multiclass_loss(cls, data: Any) -> Any:
        """With ``multiclass: joint`` a loss naming a registered multiclass loss (``multinomial``,
        ``crammer_singer``, ``weston_watkins``, a plugin's) is the joint problem's (``multiclass_loss``), and the
        binary problems of the bank (and a target of two classes) take the logistic loss."""
        if not isinstance(data, Mapping) or data.get("multiclass") != "joint":
            return data
        loss = data.get("loss")
        name = loss.get("name") if isinstance(loss, Mapping) else loss
        if isinstance(name, str) and name in {r.name for r in get_registry().registrations("multiclass_loss")}:
            try:  # its parameters are checked here, so that an error names the key as written: problem.loss
                made = _component("multiclass_loss")(loss)
            except PipelineError as e:
                value = e.value if e.has_value else PipelineError.NO_VALUE
                raise PipelineError(f"loss.{e.key}" if e.key else "loss", e.problem, value, e.allowed) from None
            return {**data, "loss": MULTINOMIAL_NAMES[0], "multiclass_loss": made}
        return data

    @model_validator(mode="after")
    def _joint(self) -> "ProblemSettings":
        """``multiclass: joint`` takes the multinomial loss (``logistic`` or ``multinomial``) and no weighting."""
        if self.multiclass != "joint":
            return self
        if self.loss.name not in MULTINOMIAL_NAMES:
            names = ", ".join(r.name for r in get_registry().registrations("multiclass_loss"))
            raise PipelineError(
                "loss",
                "problem.multiclass: joint solves one problem with a multiclass loss",
                self.loss.name,
                f"logistic (the multinomial loss) or a multiclass loss ({names}) with problem.multiclass: joint",
            )
        if self.weighting is not None:
            raise PipelineError(
                "weighting",
                "a weighting learns the weights of each binary problem",
                self.weighting.name,
                "no problem.weighting with problem.multiclass: joint (use ovr or ovo)",
            )
        return self

    @model_validator(mode="after")
    def _one_class(self) -> "ProblemSettings":
        """The ``one_class`` loss has no offset (its margin is the level 1): ``bias`` false unless given true;
        ``nu`` only with that loss, in (0, 1], and not with a C given."""
        one_class = getattr(self.loss, "name", None) == "one_class"
        if one_class and self.bias:
            if "bias" in self.model_fields_set:
                raise PipelineError("bias", "the one_class loss has no bias (the margin is the level 1)", True, "false")
            object.__setattr__(self, "bias", False)
        if self.nu is None:
            return self
        if not one_class:
            raise PipelineError(
                "nu", "only used with the one_class loss", self.nu, f"no problem.nu with the loss {self.loss.name!r}"
            )
        if not (0.0 < self.nu <= 1.0):
            raise PipelineError("nu", "out of range", self.nu, "a number in (0, 1]")
        if "C" in self.model_fields_set:
            raise PipelineError("C", "not used with problem.nu (C is found for nu)", self.C, "no problem.C with nu")
        return self

    @model_validator(mode="after")
    def _second_stage(self) -> "ProblemSettings":
        """With a weighting: one that learns from the loss's target, and the ``uniform`` regularizer (the default
        replaced; another one given is refused)."""
        if self.weighting is None:
            return self
        reg = get_registry()
        task = self.loss.task
        if task not in self.weighting.tasks:
            ok = ", ".join(r.name for r in reg.registrations("weighting") if task in r.cls.tasks)
            raise PipelineError(
                "weighting",
                f"weighting {self.weighting.name!r} does not learn from a {task} target (loss {self.loss.name!r})",
                self.weighting.name,
                f"a weighting for {task}: {ok}",
            )
        if "regularizer" in self.model_fields_set and self.regularizer.name != SECOND_STAGE_REGULARIZER:
            raise PipelineError(
                "regularizer",
                f"problem.weighting {self.weighting.name!r} trains the uniform combination of the weighted kernels",
                self.regularizer.name,
                f"{SECOND_STAGE_REGULARIZER!r} or no regularizer with problem.weighting",
            )
        self.regularizer = reg.create("regularizer", SECOND_STAGE_REGULARIZER)
        return self
