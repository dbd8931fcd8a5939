r"""Building factor banks from data: :math:`K_m \approx L_m L_m^\top` without N × N matrices.

:func:`build_factor_bank` turns a bank description (the ``kernels.bank``
vocabulary of :func:`~mklkit.kernels.description.expand_bank`) and training points
into a :class:`~mklkit.kernels.factor.FactorBank` whose kernel ``m`` is the
normalised kernel of :meth:`KernelBank.build <mklkit.kernels.build.KernelBank.build>`
— same functions, parameters, feature groups and normalisation — held as a
factor.  Per kernel:

exact (``method="exact"``, and ``"auto"`` where it applies)
    The kernel has an explicit, small feature map :math:`\phi` and
    :math:`L = \phi(X)`.  ``linear`` on a feature group is its own factor,
    :math:`L = X_g` (sparse stays sparse when every kernel of the bank is
    such a factor); ``poly`` :math:`(s\langle x,z\rangle + c)^p` has the
    monomial map
    :math:`\phi_\alpha(x) = \sqrt{\binom{p}{j} c^{p-j} s^j \tfrac{j!}{\alpha!}}\;x^\alpha`
    over the multi-indices :math:`|\alpha| = j \le p` (only :math:`j = p` when
    :math:`c = 0`), of dimension :math:`\binom{d+p}{p}`; it is used up to
    ``max_exact_dim`` dimensions (default 256), beyond that ``"auto"`` falls
    back to pivoted Cholesky (and says so in the log).
pivoted Cholesky (``"pivoted_cholesky"``; ``"auto"`` for all others)
    The incomplete Cholesky decomposition with greedy pivoting (Harbrecht,
    Peters & Schneider 2012, Alg. 1; Fine & Scheinberg 2001): pivot
    :math:`i = \arg\max_i d_i` of the residual diagonal
    :math:`d = \mathrm{diag}(K - LL^\top)`, new column
    :math:`\ell = (K_{:,i} - L L_{i,:}^\top)/\sqrt{d_i}`, until
    :math:`\mathrm{tr}(K - LL^\top) = \sum_i d_i \le` ``tol`` :math:`\cdot\,\mathrm{tr}K`
    or the rank reaches ``rank``.  Kernel columns are computed through the
    kernel function in batches of 64 candidate pivots (the largest residual
    diagonals; one :meth:`~mklkit.kernels.functions.KernelFunction.gram`
    call and one BLAS product per batch); within a batch the greedy step
    takes the candidate of largest residual while it is at least half the
    largest residual of all points, else a new batch starts.  Repeated
    points are factored once: with :math:`P` the indicator of the distinct
    points of the feature group and :math:`c` their counts,
    :math:`K = PK_uP^\top` and the pivoted Cholesky of
    :math:`C^{1/2}K_uC^{1/2}` has the residual trace of :math:`K` itself
    (the same tolerance; pivots weighted by multiplicity), so
    :math:`L = PC^{-1/2}\tilde L` costs kernel columns of the distinct
    points only (a9a's 123 binary features: 24,947 distinct of 32,561
    points; 12-feature subsets: under 200).
Nyström (``"nystrom"``)
    Landmarks :math:`S`, a uniform sample without replacement (``seed``):
    :math:`K \approx C K_{SS}^{+} C^\top`, :math:`C = K_{:,S}`, with
    :math:`K_{SS} = U\Lambda U^\top` cut at eigenvalues
    :math:`\lambda \le 10^{-8}\lambda_{\max}` (so that rounding in :math:`C`,
    amplified by :math:`\lambda^{-1}`, stays below about :math:`10^{-8}` of the
    largest entry; pivoted Cholesky is accurate to round-off) and
    :math:`L = C\,U_k\Lambda_k^{-1/2}`.  ``rank`` landmarks, or (``rank=None``)
    64, 128, ... (nested samples) until the trace tolerance holds.

Extension to new points (:meth:`FactorMap.transform`, also
:meth:`FactorBank.transform <mklkit.kernels.factor.FactorBank.transform>`):
:math:`\phi(X_{new})` for exact factors;
:math:`L_{new} = K(X_{new}, X_P)\,L_P^{-\top}` for pivoted Cholesky with
pivots :math:`P` (:math:`L_P = L_{P,:}` is lower triangular);
:math:`L_{new} = K(X_{new}, X_S)\,U_k\Lambda_k^{-1/2}` for Nyström.  Then
:math:`L_{new}L^\top` is the approximation of the cross kernel that
:math:`LL^\top` is of the training kernel (exactly :math:`K(X_{new}, X)` for
exact factors), and predictions :math:`\sum_m L_{m,new}\beta_m + b`
(:math:`\beta_m = L_m^\top\alpha_m`) need no :math:`N_{new}\times N` matrix.

Normalisation as in :class:`~mklkit.kernels.build.KernelBank`: ``"trace"``
divides by :math:`\mathrm{tr}K_m = \sum_i k_m(x_i, x_i)` (from the diagonal;
factors by its square root); ``"diagonal"`` factors
:math:`k(x,z)/\sqrt{k(x,x)k(z,z)}` (rows of :math:`L` scaled by
:math:`1/\sqrt{k(x_i,x_i)}`, new points by their own diagonal, a new point
with :math:`k(x,x) = 0` gets a zero row); ``"none"``.

Approximation error: per kernel the residual trace
:math:`\mathrm{tr}(K_m) - \|L_m\|_F^2 \ge 0` of the normalised kernel, exact
from the diagonal (``FactorBank.trace_error``, ``relative_trace_error``,
``overall_trace_error``).  Since :math:`K_m - L_mL_m^\top \succeq 0`, it
bounds every residual entry: :math:`|(K - LL^\top)_{ij}| \le \sqrt{d_i d_j}`
and :math:`\|K - LL^\top\|_2 \le \mathrm{tr}(K - LL^\top)`.

Memory: ``memory_budget`` bytes (default
:data:`~mklkit.kernels.description.DEFAULT_MEMORY_BUDGET`) bound the factors plus
the working space of the kernel being factorized (its feature columns, one
batch of kernel rows).  Bytes known in advance (exact factors, and the
upper bound ``rank`` per kernel when given) are checked before anything is
allocated; a tolerance that cannot be reached within the budget is reported
before the allocation that would exceed it, naming the key to change and
what fits.  The factors of each kernel grow in blocks of 256 rows (no
copies while growing) and are moved into the bank's one (R, N) array at
the end, block by block.

The explicit feature maps and the map to new points are in
:mod:`mklkit.kernels.factorize.algorithms`, pivoted Cholesky and Nyström in
:mod:`mklkit.kernels.factorize.lowrank`, the points they read in
:mod:`mklkit.kernels.factorize.points`; one kernel factored and normalised in
:mod:`mklkit.kernels.factorize.per_kernel`; the settings in
:mod:`mklkit.kernels.factorize.settings`; the memory checks and the assembly
of a bank in :mod:`mklkit.kernels.factorize.build`.
"""

from __future__ import annotations

from .algorithms import FactorMap, FoldedFactorMap, KernelFactor, poly_map_dim
from .build import (
    DEFAULT_TOL,
    MAX_EXACT_DIM,
    METHODS,
    FactorError,
    RankCapWarning,
    build_factor_bank,
    check_settings,
    exact_rank,
    rank_that_fits,
)

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
