r"""Kernel metrics: alignment, centred alignment, radius, margin, their ratio and the spectral ratio.

Every function takes kernels in any of these forms:

* one Gram matrix, an (N, N) array: the result is a float;
* a stack, an (M, N, N) array, a :class:`~mklkit.kernels.KernelBank` or an
  :class:`~mklkit.kernels.ops.ArrayBank`: one value per kernel, an (M,) array;
* a :class:`~mklkit.kernels.FactorBank` (:math:`K_m = L_mL_m^\top`): one value per kernel, computed
  from the factors without forming an N × N matrix.

The Frobenius products of factors are those of small matrices,
:math:`\langle L_1L_1^\top, L_2L_2^\top\rangle_F = \|L_1^\top L_2\|_F^2`; centring a factor kernel
centres the rows of its factor, :math:`HLL^\top H = (HL)(HL)^\top` with :math:`H = I - \mathbf 1\mathbf
1^\top/N`; the quadratic programs of :func:`radius` and :func:`margin` read the columns
:math:`K_{:,k} = L L_{k,:}^\top`.  See ``docs/metrics.md``.

Modules: ``_inputs`` (the accepted kernel forms and targets, checked; :func:`target_kernel`),
``alignments`` (Frobenius products, alignments, spectral ratio, :func:`combine`), ``programs`` (the
radius and margin programs, :class:`SimplexSolution`).
"""

from ._inputs import target_kernel
from .alignments import alignment, alignment_matrix, centered_alignment, combine, frobenius_products, spectral_ratio
from .programs import SimplexSolution, margin, radius, ratio

__all__ = [
    "SimplexSolution",
    "alignment",
    "alignment_matrix",
    "centered_alignment",
    "combine",
    "frobenius_products",
    "margin",
    "radius",
    "ratio",
    "spectral_ratio",
    "target_kernel",
]
