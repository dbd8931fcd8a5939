"""Engine contract.

An engine solves a :class:`~mklkit.problem.Problem` through the component
contracts only (never a concrete loss or regularizer) and returns a
:class:`~mklkit.result.SolveResult`.  Engines are registered through the
plugin hook exactly like losses and regularizers.
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar

from ..components.base import Component
from ..components.params import Param
from ..problem import Problem
from ..result import SolveResult

#: ``callback(state) -> bool``; ``state`` is the history record of the outer
#: iteration just finished; a truthy return stops the solve (status STOPPED).
Callback = Callable[[dict[str, Any]], Any]

COMMON_PARAMS: tuple[Param, ...] = (
    Param("tol", 1e-2, "relative duality gap at which to stop (SpicyMKL §6.1)",
          low=0.0, low_open=True),
    Param("max_iter", 500, "maximum number of outer iterations", type=int, low=1),
)


class Engine(Component):
    """Base class of solvers.  Instances hold validated solver options."""

    kind: ClassVar[str] = "engine"
    params: ClassVar[tuple[Param, ...]] = COMMON_PARAMS

    def supports(self, problem: Problem) -> str | None:
        """``None`` when this engine can solve ``problem``, else the reason why not."""
        return None

    def check_supported(self, problem: Problem) -> None:
        """Raise ``ValueError`` when :meth:`supports` gives a reason.

        The message names the engine and gives the reason:
        ``engine 'spicy' cannot solve this problem: <reason>``.  Engines call
        it first in :meth:`solve`.
        """
        reason = self.supports(problem)
        if reason is not None:
            raise ValueError(f"engine {self.name!r} cannot solve this problem: {reason}")

    #: The bank representations ``solve`` works on (``Problem.representation``):
    #: ``"array"`` reads ``problem.K``; ``"sharded"``/``"factor"`` need ``problem.bank`` only.
    representations: ClassVar[tuple[str, ...]] = ("array",)

    #: Whether ``solve`` uses ``warm_start`` (a previous result on the same
    #: kernels and labels, e.g. the neighbouring C of a regularization path).
    supports_warm_start: ClassVar[bool] = False

    def solve(
        self,
        problem: Problem,
        callback: Callback | None = None,
        warm_start: SolveResult | None = None,
    ) -> SolveResult:
        """Solve ``problem``; never raise because the solve did not converge.

        Parameters
        ----------
        problem : Problem
        callback : callable, optional
            Called with the history record of every outer iteration; a
            truthy return stops the solve (status ``stopped``).
        warm_start : SolveResult, optional
            A previous solution on the same kernels and labels (e.g. the
            neighbouring C of a regularization path).  Engines that do not
            use it (``supports_warm_start`` False) ignore it.

        Raises
        ------
        ValueError
            When :meth:`supports` gives a reason (:meth:`check_supported`),
            or ``warm_start`` does not fit the problem; never because the
            solve did not converge.
        """
        raise NotImplementedError
