"""What an engine can require of a problem: capabilities of the loss, the regularizer and the
bank (the catalogue is in ``docs/contracts.md``, "Capabilities").

An engine states its needs in :attr:`~mklkit.engines.base.Engine.requires` (a
:class:`Requires`) and :meth:`~mklkit.engines.base.Engine.supports` derives its reason from
them: no engine tests the name or the class of a component.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any, Callable

import numpy as np

from ..kernels.ops import BankAccessError
from ..problem import Problem

_SUBJECT = {"loss": "the loss", "regularizer": "the regularizer", "bank": "the Gram bank"}


@dataclass(frozen=True)
class Capability:
    """A property a component (or the bank) has or lacks.

    Attributes
    ----------
    name : str
        Short name, e.g. ``"smooth_primal"``.
    of : {"loss", "regularizer", "bank"}
        What it is a property of; a bank capability is tested on the problem.
    has, lacks : str
        For messages: ``"a smooth conjugate (...)"``, ``"has no smooth conjugate (...)"``.
    test : callable, optional
        ``test(component) -> bool`` (``test(problem)`` for the bank); raising is lacking it.
        By default the component's flag ``name`` is True.
    explain : callable, optional
        ``explain(subject) -> str``, a message for the lack that replaces ``lacks``.
    """

    name: str
    of: str
    has: str
    lacks: str
    test: Callable[[Any], bool] | None = field(default=None, repr=False)
    explain: Callable[[Any], str] | None = field(default=None, repr=False, compare=False)

    def holds(self, subject: Any) -> bool:
        """Whether ``subject`` (a component, or the problem for a bank capability) has it."""
        try:
            return bool(self.test(subject)) if self.test else getattr(subject, self.name) is True
        except Exception:  # noqa: BLE001 - a component that cannot tell lacks it
            return False


@dataclass(frozen=True)
class Requirement:
    """One need of an engine: any one of ``options``, for the reason ``why``."""

    options: tuple[Capability, ...]
    why: str = ""

    def __post_init__(self) -> None:
        kinds = {c.of for c in self.options}
        if len(kinds) != 1:
            raise ValueError(f"the options of a requirement are of one kind; got {sorted(kinds)}")

    @property
    def of(self) -> str:
        return self.options[0].of

    def met(self, subject: Any) -> bool:
        return any(c.holds(subject) for c in self.options)

    def lack(self, subject: Any) -> str:
        """What ``subject`` lacks, as a sentence (without ``why``)."""
        if self.of == "bank":
            first = self.options[0]
            return first.explain(subject) if first.explain else f"the Gram bank {first.lacks}"
        what = f"{_SUBJECT[self.of]} {subject.describe()}"
        if len(self.options) == 1:
            c = self.options[0]
            return f"{what} {c.explain(subject) if c.explain else c.lacks}"
        has = [c.has for c in self.options]
        if len(has) == 2:
            return f"{what} has neither {has[0]} nor {has[1]}; one of them is needed"
        return f"{what} has none of {', '.join(has[:-1])} or {has[-1]}; one of them is needed"


def needs(*options: Capability, why: str = "") -> Requirement:
    """A :class:`Requirement`: any one of ``options`` (of one kind), for the reason ``why``."""
    return Requirement(tuple(options), why)


@dataclass(frozen=True)
class Requires:
    """What an engine needs of a problem.

    Attributes
    ----------
    loss, regularizer, bank : tuple of Requirement (or Capability)
        Every requirement must be met; a bare :class:`Capability` is one with that one option.
    sample_weight : bool
        Whether the engine accepts a weighted problem (through
        :class:`~mklkit.engines.objectives.SampleLoss`); False by default.
    """

    loss: tuple[Any, ...] = ()
    regularizer: tuple[Any, ...] = ()
    bank: tuple[Any, ...] = ()
    sample_weight: bool = False

    def __post_init__(self) -> None:
        for part in ("loss", "regularizer", "bank"):
            reqs = tuple(r if isinstance(r, Requirement) else needs(r) for r in getattr(self, part))
            bad = [r for r in reqs if r.of != part]
            if bad:
                raise ValueError(f"Requires.{part} holds a requirement of the {bad[0].of}")
            object.__setattr__(self, part, reqs)

    def __add__(self, other: Requires) -> Requires:
        # more requirements of the components: the engine's own word on weights stands
        return Requires(
            self.loss + other.loss,
            self.regularizer + other.regularizer,
            self.bank + other.bank,
            sample_weight=self.sample_weight,
        )

    def reasons(self, problem: Problem) -> list[str]:
        """One sentence per reason (consecutive lacks with the same ``why`` joined by "and")."""
        parts = ((self.loss, problem.loss), (self.regularizer, problem.regularizer), (self.bank, problem))
        unmet = [(r.why, r.lack(subject)) for reqs, subject in parts for r in reqs if not r.met(subject)]
        out = [_sentence([lack for _, lack in group], why) for why, group in groupby(unmet, key=itemgetter(0))]
        if getattr(problem, "sample_weight", None) is not None and not self.sample_weight:
            out.append(WEIGHTS_REFUSED)
        return out


#: The reason of an engine without ``Requires(sample_weight=True)`` against a weighted problem.
WEIGHTS_REFUSED = (
    "the problem has sample weights (sample_weight or class_weight) and this engine "
    "does not accept them (Requires.sample_weight is False)"
)


def _sentence(lacks: list[str], why: str | None) -> str:
    text = " and ".join(lacks)
    return f"{text}: {why}" if why else text


# The catalogue (docs/contracts.md, "Capabilities")
SMOOTH_CONJUGATE = Capability(
    "smooth_conjugate",
    "loss",
    has="a smooth conjugate (smooth_conjugate = True)",
    lacks="has no smooth conjugate (smooth_conjugate = False)",
)

CONSTRAINED_FORM = Capability(
    "constrained",
    "loss",
    has="the constrained form of SpicyMKL eq. 33 (@kernel methods l0, l0_grad, l0_hess, cons, cons_grad, cons_hess)",
    lacks="has no constrained form of its conjugate (no @kernel methods l0 ... cons_hess)",
    test=lambda loss: loss.constrained is not None,
)

SMOOTH_PRIMAL = Capability(
    "smooth_primal",
    "loss",
    has="a differentiable primal with a Lipschitz derivative (smooth_primal = True)",
    lacks="is not differentiable (smooth_primal is False)",
)

LINEAR_CONJUGATE = Capability(
    "linear_conjugate",
    "loss",
    has="a conjugate linear on each side of 0 on a bounded domain (linear_conjugate = True)",
    lacks="has no conjugate linear on each side of 0 on a bounded domain (linear_conjugate = False)",
)


def _is_hinge_conjugate(loss: Any) -> bool:
    if not (loss.linear_conjugate is True and loss.task == "classification"):
        return False
    lo, hi, s_lo, s_hi = loss.linear_pieces(np.array([1.0, -1.0]))
    return bool(
        np.allclose(lo, [-1.0, 0.0], rtol=0.0, atol=1e-12)
        and np.allclose(hi, [0.0, 1.0], rtol=0.0, atol=1e-12)
        and abs(s_lo[0] - 1.0) <= 1e-12
        and abs(s_hi[1] + 1.0) <= 1e-12
    )


HINGE_CONJUGATE = Capability(
    "hinge_conjugate",
    "loss",
    has="the hinge's conjugate y u on -1 <= y u <= 0 (linear_conjugate = True)",
    lacks="is not hinge in form: its conjugate is not y u on -1 <= y u <= 0",
    test=_is_hinge_conjugate,
)

SEPARABLE = Capability(
    "separable",
    "regularizer",
    has="a sum over kernels of a function of one block norm (separable = True)",
    lacks="is not separable over kernels (separable = False)",
)

SMOOTH_REG_CONJUGATE = Capability(
    "smooth_conjugate",
    "regularizer",
    has="a smooth conjugate (smooth_conjugate = True)",
    lacks="has a non-smooth conjugate (smooth_conjugate = False)",
)

BREGMAN_FORM = Capability(
    "bregman",
    "regularizer",
    has="a Bregman form of its kernel-weight penalty (@kernel methods bregman_F, bregman_f, "
    "bregman_finv, bregman_d0; separable = True)",
    lacks="has no Bregman form of its kernel-weight penalty (no bregman_* @kernel methods, or not separable)",
    test=lambda reg: reg.bregman is not None and reg.separable is True,
)


def _pnorm_penalty(reg: Any) -> bool:
    wn = reg.weight_norm
    return wn is not None and wn.lam is not None and float(wn.p) > 1.0


PNORM_PENALTY = Capability(
    "pnorm_penalty",
    "regularizer",
    has="the squared p-norm form of the kernel weights, p > 1 (weight_norm = WeightNorm(p, lam), SMO-MKL eq. 1)",
    lacks="is not the squared p-norm penalty of the kernel weights (weight_norm = WeightNorm(p, lam) with p > 1)",
    test=_pnorm_penalty,
)


def _l1_squared(reg: Any) -> bool:
    wn = reg.weight_norm
    return wn is not None and wn.lam is None and float(wn.p) == 1.0


L1_SQUARED_FORM = Capability(
    "l1_squared",
    "regularizer",
    has="the squared block 1-norm (weight_norm = WeightNorm(1))",
    lacks="is not l1_squared in form: not the squared block 1-norm "
    "(weight_norm = WeightNorm(1), the support kernel machine's problem (P))",
    test=_l1_squared,
)


def _array_bank(problem: Problem) -> bool:
    problem.K  # noqa: B018 - raises BankAccessError for a bank that is not one array
    return True


def _array_bank_lack(problem: Problem) -> str:
    try:
        problem.K  # noqa: B018
    except BankAccessError as exc:
        return str(exc)
    return "the Gram bank is not one (M, N, N) array"  # pragma: no cover - holds then


ARRAY_BANK = Capability(
    "array_bank",
    "bank",
    has="a Gram bank held as one (M, N, N) array (problem.K)",
    lacks="is not held as one (M, N, N) array (problem.K)",
    test=_array_bank,
    explain=_array_bank_lack,
)


def _factor_bank(problem: Problem) -> bool:
    # the representation, not the class: the pipeline's probe problem has no bank yet
    return problem.representation == "factor"


def _factor_bank_lack(problem: Problem) -> str:
    bank = problem.bank
    return (
        f"the Gram bank is held as {type(bank).__name__} (representation "
        f"{getattr(bank, 'representation', '?')!r}), not as a FactorBank (kernels held as "
        "factors K_m = L_m L_m^T); build one with FactorBank.from_blocks or "
        "kernels.factor in a spec, or use spicy"
    )


FACTOR_BANK = Capability(
    "factor_bank",
    "bank",
    has="kernels held as factors K_m = L_m L_m^T (problem.bank is a FactorBank)",
    lacks="is not a FactorBank (kernels held as factors K_m = L_m L_m^T)",
    test=_factor_bank,
    explain=_factor_bank_lack,
)
