"""Typed records that the jitted SMO loops (:mod:`mklkit_smo._smo`) take.

Every loop takes a few records instead of dozens of arrays:

* :class:`SmoOptions` -- the loop's options;
* :class:`BregmanFns` -- the regularizer's Bregman functions by compiled address, and
  their parameter vector;
* :class:`SmoBank` -- the precomputed bank and the diagonals on the current points;
* :class:`FeatureRows` -- the features and kernel descriptions rows are computed from,
  with the scratch arrays of that computation
  (:meth:`mklkit_smo.FeatureKernels.feature_rows`);
* :class:`RowCache` -- the LRU cache of kernel rows;
* :class:`SmoState` -- the dual variables and the kernel sums on the current points;
* :class:`SmoWork` -- per-kernel work arrays;
* :class:`KernelSums` -- what the passes over the kernels read and write, taken from the
  state and the bank inside the loops (a smaller record to pass than both).

A record is a ``NamedTuple`` of float64/int64 C-contiguous arrays and scalars.
Each class is registered with its numba type, so that a call does not type the
record element by element (:func:`check_record` checks a record's fields once).
The records are flat: numba's parallel loops take a record only when none of
its fields is a record itself.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit, types

from mklkit.first_class import check_record as check_fields
from mklkit.first_class import first_class, fixed_type

#: ``FLAGS[1]`` (True) and ``FLAGS[0]`` (False): constant flags passed between jitted functions as
#: runtime values.  numba compiles a callee once per literal argument (``Literal[bool](True)``), so
#: literal flags (and literal integers) in two callers would compile it and all it calls twice.
FLAGS = np.array([False, True])

REG_PNORM = 0
REG_BREGMAN = 1
REG_SKM = 2  # Moreau-Yosida regularized SKM (Bach et al. 2004), bpar = [a_1..a_m, d_1..d_m]
ROWS_PRECOMPUTED = 0  # rows are views of the full bank K
ROWS_FEATURES = 1  # rows computed from the features into the cache
ROWS_GATHER = 2  # rows gathered from K on the active points into the cache

STOP_CHUNK = 0  # the chunk's step budget is used up
STOP_KKT = 1  # maximal KKT violation <= eps
STOP_NUMERICAL = 2  # a non-finite value appeared
STOP_STALLED = 3  # steps stopped making progress

FAM_RBF = 0
FAM_POLY = 1
FAM_LINEAR = 2

# istate layout (counters, written by the chunk)
IS_CLOCK = 0
IS_HITS = 1
IS_MISSES = 2
IS_STEPS = 3
IS_STOP = 4
IS_ZERO_STEPS = 5
IS_NEWTON = 6
IS_LEN = 7
# fout layout
FO_VIOL = 0
FO_LEN = 1

_TINY = 1e-300

__all__ = [
    "SmoOptions",
    "BregmanFns",
    "SmoBank",
    "FeatureRows",
    "RowCache",
    "SmoState",
    "SmoWork",
    "KernelSums",
    "bregman_fns",
    "check_record",
    "no_function",
    "no_d0",
    "ARRAY_FN",
    "SCALAR_FN",
    "OPTS_T",
    "BREG_T",
    "BANK_T",
    "ROWS_T",
    "CACHE_T",
    "STATE_T",
    "WORK_T",
]

_f8 = types.float64
_i8 = types.int64
_b1 = types.boolean
_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
_F3 = types.float64[:, :, ::1]
_I1 = types.int64[::1]
#: A Bregman ``F``, ``f`` or ``finv`` (``(d, params) -> array``) passed into the loops.
ARRAY_FN = types.FunctionType(_F1(_F1, _F1))
#: A Bregman ``d0`` (``params -> float``) passed into the loops.
SCALAR_FN = types.FunctionType(_f8(_F1))


class SmoOptions(NamedTuple):
    """Options of :func:`~mklkit_smo._smo.smo_chunk`."""

    reg_mode: int  # REG_PNORM, REG_BREGMAN or REG_SKM
    rows_mode: int  # ROWS_PRECOMPUTED, ROWS_FEATURES or ROWS_GATHER
    max_steps: int  # SMO steps of one call
    analytic: bool  # p = 2: the cubic's root instead of Newton-Raphson
    parallel: bool  # multithreaded passes
    nblocks: int  # column blocks of the multithreaded passes
    eps: float  # KKT tolerance
    q: float  # the dual norm's exponent (p-norm form)
    lam: float  # the regularizer's lambda
    fd0: float  # f(d0) (Bregman form)
    tau: float  # smallest curvature of a pair


class BregmanFns(NamedTuple):
    """A Bregman form (:class:`mklkit.components.base.BregmanJit`) by compiled address,
    with its parameter vector (``[a_1..a_m, d_1..d_m]`` for the SKM)."""

    F: Any
    f: Any
    finv: Any
    d0: Any
    params: np.ndarray


class SmoBank(NamedTuple):
    """The precomputed bank ``K`` (M, N, N) (a (1, 1, 1) stand-in when rows are computed
    from features), the diagonals on the current points, the kernels whose diagonal is
    not constant (``nck``), the constant diagonals (``dconst``) and the points' rows in
    the bank (``cmap``)."""

    K: np.ndarray
    diag: np.ndarray
    nck: np.ndarray
    dconst: np.ndarray
    cmap: np.ndarray


class FeatureRows(NamedTuple):
    """Features (CSR and CSC), feature groups and kernel descriptions
    (:meth:`mklkit_smo.FeatureKernels._build_program`), and the scratch arrays of the
    row computation (``xi`` (D,), zero between uses, and ``acc`` (G, N))."""

    xr_ptr: np.ndarray
    xr_idx: np.ndarray
    xr_val: np.ndarray
    xc_ptr: np.ndarray
    xc_idx: np.ndarray
    xc_val: np.ndarray
    g_fptr: np.ndarray
    g_feat: np.ndarray
    g_sqn: np.ndarray
    k_group: np.ndarray
    k_fam: np.ndarray
    k_par: np.ndarray
    k_pn: np.ndarray
    xi: np.ndarray
    acc: np.ndarray


class RowCache(NamedTuple):
    """LRU cache of kernel rows: ``slots`` (S, M, n_points), the slot of each point (-1:
    none), the point in each slot (-1: none) and each slot's time of last use."""

    slots: np.ndarray
    slot_of: np.ndarray
    point_of: np.ndarray
    stamp: np.ndarray


class SmoState(NamedTuple):
    """The dual variables, the kernel sums and the counters (``_smo`` module docstring)."""

    beta: np.ndarray
    z: np.ndarray
    e: np.ndarray
    ub: np.ndarray
    pt: np.ndarray
    var_pos: np.ndarray
    var_neg: np.ndarray
    gconst: np.ndarray
    gamma: np.ndarray
    v: np.ndarray
    c: np.ndarray
    d: np.ndarray
    u1: np.ndarray
    u2: np.ndarray
    F: np.ndarray
    Dg: np.ndarray
    Z1: np.ndarray
    V2: np.ndarray
    X2: np.ndarray
    Ri: np.ndarray
    istate: np.ndarray
    fout: np.ndarray


class KernelSums(NamedTuple):
    """The kernel sums and coefficients of :class:`SmoState` and the diagonals of
    :class:`SmoBank` that the passes over the kernels use (built inside the loops)."""

    v: np.ndarray
    d: np.ndarray
    u1: np.ndarray
    u2: np.ndarray
    F: np.ndarray
    Dg: np.ndarray
    Z1: np.ndarray
    V2: np.ndarray
    diag: np.ndarray
    nck: np.ndarray
    dconst: np.ndarray


class SmoWork(NamedTuple):
    """Per-kernel work arrays of the pair step."""

    a: np.ndarray
    w: np.ndarray
    ct: np.ndarray


OPTS_T = types.NamedTuple([_i8, _i8, _i8, _b1, _b1, _i8, _f8, _f8, _f8, _f8, _f8], SmoOptions)
BREG_T = types.NamedTuple([ARRAY_FN, ARRAY_FN, ARRAY_FN, SCALAR_FN, _F1], BregmanFns)
BANK_T = types.NamedTuple([_F3, _F2, _I1, _F1, _I1], SmoBank)
ROWS_T = types.NamedTuple([_I1, _I1, _F1, _I1, _I1, _F1, _I1, _I1, _F2, _I1, _I1, _F2, _F2, _F1, _F2], FeatureRows)
CACHE_T = types.NamedTuple([_F3, _I1, _I1, _I1], RowCache)
STATE_T = types.NamedTuple(
    [_F1, _F1, _F1, _F1, _I1, _I1, _I1, _F1, _F1, _F2, _F1, _F1, _F1, _F1, _F1, _F1, _F1, _F1, _F1, _F1, _I1, _F1],
    SmoState,
)
WORK_T = types.NamedTuple([_F1, _F1, _F1], SmoWork)
_TYPES = {
    SmoOptions: OPTS_T,
    BregmanFns: BREG_T,
    SmoBank: BANK_T,
    FeatureRows: ROWS_T,
    RowCache: CACHE_T,
    SmoState: STATE_T,
    SmoWork: WORK_T,
}


for _cls, _typ in _TYPES.items():
    fixed_type(_cls, _typ)


def check_record(rec: Any) -> Any:
    """``rec`` itself, after checking every field against its record's registered type."""
    return check_fields(rec, _TYPES[type(rec)])


@njit(cache=True)
def no_function(x, params):  # pragma: no cover - jitted
    """Stand-in for the Bregman ``F``, ``f`` and ``finv`` when the form has none."""
    return x.copy()


@njit(cache=True)
def no_d0(params):  # pragma: no cover - jitted
    """Stand-in for the Bregman ``d0`` when the form has none."""
    return 1.0


def bregman_fns(bregman: Any, params: np.ndarray) -> BregmanFns:
    """The record of a :class:`~mklkit.components.base.BregmanJit` (None: the stand-ins)
    and its parameter vector (kept, not copied: the SKM's continuation changes it in
    place)."""
    if bregman is None:
        F = f = finv = no_function
        d0 = no_d0
    else:
        F, f, finv, d0 = bregman.F, bregman.f, bregman.finv, bregman.d0
    return check_record(
        BregmanFns(
            first_class(F, ARRAY_FN),
            first_class(f, ARRAY_FN),
            first_class(finv, ARRAY_FN),
            first_class(d0, SCALAR_FN),
            params,
        )
    )
