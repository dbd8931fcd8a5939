"""Engines: the skeleton every engine is built on, the capabilities they require, the built-ins.

:mod:`mklkit.engines.base` (the skeleton: :class:`Engine`, :class:`Run`,
:class:`Algorithm`, :func:`stop_message`, :func:`check_warm_start`),
:mod:`mklkit.engines.capabilities` (what an engine can require of a problem),
:mod:`mklkit.engines.objectives` and :mod:`mklkit.engines.common` (the
certificate every engine computes the same way), and the built-in engines
:mod:`~mklkit.engines.spicy`, :mod:`~mklkit.engines.proximal`,
:mod:`~mklkit.engines.bcd` and :mod:`~mklkit.engines.dual_cd`.  No engine
imports the registry or the pipeline: the choice among the installed engines
(``auto``) is the pipeline's, :mod:`mklkit.pipeline.choose`.
"""

from .base import (
    COMMON_PARAMS,
    Algorithm,
    Callback,
    Engine,
    Requirement,
    Requires,
    Run,
    UnsupportedBankError,
    check_warm_start,
    needs,
    stop_message,
)

__all__ = [
    "COMMON_PARAMS",
    "Algorithm",
    "Callback",
    "Engine",
    "Requirement",
    "Requires",
    "Run",
    "UnsupportedBankError",
    "check_warm_start",
    "needs",
    "stop_message",
]
