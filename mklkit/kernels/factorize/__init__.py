r"""Factor banks built from data: :math:`K_m \approx L_m L_m^\top` without N × N matrices.

:func:`build_factor_bank` gives each kernel of a bank description, normalised as
:meth:`KernelBank.build <mklkit.kernels.build.KernelBank.build>` does, as an exact factor
(``linear``, the monomial map of ``poly``) or by pivoted Cholesky (Harbrecht, Peters &
Schneider 2012, Alg. 1) or Nyström; see ``docs/factor_banks.md``.
"""

from __future__ import annotations

from .algorithms import FactorMap, FoldedFactorMap, KernelFactor, poly_map_dim
from .build import build_factor_bank, exact_rank, rank_that_fits
from .settings import DEFAULT_TOL, MAX_EXACT_DIM, METHODS, FactorError, RankCapWarning, check_settings

__all__ = [
    "METHODS",
    "DEFAULT_TOL",
    "MAX_EXACT_DIM",
    "FactorError",
    "RankCapWarning",
    "KernelFactor",
    "FactorMap",
    "FoldedFactorMap",
    "build_factor_bank",
    "check_settings",
    "exact_rank",
    "rank_that_fits",
    "poly_map_dim",
]
