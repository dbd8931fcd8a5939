r"""The state of an SMO-MKL solve: the dual variables, the kernel sums and the views
the jitted loop works on, kept exact and shrunk.

:class:`_SmoState` sets up the dual of :mod:`mklkit_smo.engine`, keeps
:math:`v = (K_k\gamma)_k` exact where the loop needs it (:meth:`_SmoState._sync`,
:meth:`_SmoState._refresh`), and leaves out and brings back the variables stuck at a
bound (LibSVM's shrinking).  The solve on it is :class:`mklkit_smo.loop._SmoRun`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from mklkit.engines.base import Algorithm, Run
from mklkit.engines.capabilities import PNORM_PENALTY
from mklkit.problem import Problem
from mklkit.result import SolveResult

logger = logging.getLogger(__name__)

#: A shrinking step is taken only when it leaves at most this fraction of the points active
#: (each one rebuilds the compact copies and empties the row cache).
_SHRINK_FRACTION = 0.8
#: Automatic ``check_every``: a history record every n / _RECORDS_PER_PASS SMO steps for n
#: dual variables (at most every refresh interval), so that even a solve of one pass over
#: the variables leaves a gap and active-kernel curve; a record costs about one step.
_RECORDS_PER_PASS = 20
#: M * N from which the passes over the state run multithreaded (``parallel="auto"``).
_PARALLEL_WORK = 50_000_000


@dataclass
class _Reg:
    """The regularizer in SMO form."""

    mode: int
    q: float
    lam: float
    fd0: float
    Fd0: float
    d0: float
    bpar: np.ndarray
    finv: Any
    F: Any
    reg: Any
    bregman: Any = None  # the BregmanJit of a Bregman form (None: the loops get stand-ins)

    def phi(self, c: np.ndarray) -> float:
        r"""The dual's regularizer part :math:`\Phi(c)` (paper scale)."""
        if self.mode == 0:
            top = float(np.max(c)) if c.size else 0.0
            if top <= 0.0:
                return 0.0
            nrm = top * float(np.sum((c / top) ** self.q)) ** (1.0 / self.q)
            return nrm * nrm / (8.0 * self.lam)
        theta = self.fd0 + c / (2.0 * self.lam)
        d = np.asarray(self.finv(np.ascontiguousarray(theta), self.bpar), dtype=np.float64)
        Fd = np.asarray(self.F(d, self.bpar), dtype=np.float64)
        return float(self.lam * np.sum(d * theta - Fd + self.Fd0 - self.d0 * self.fd0))

    def omega(self, c: np.ndarray, d: np.ndarray) -> float:
        r"""The primal regularizer (paper scale) at the blocks :math:`w_k = d_k K_k\gamma`."""
        x = d * np.sqrt(np.maximum(c, 0.0))
        if self.mode == 0:
            return self.reg.value(x, 1.0)
        Fd = np.asarray(self.F(np.ascontiguousarray(d), self.bpar), dtype=np.float64)
        rF = Fd - self.Fd0 - (d - self.d0) * self.fd0
        return float(np.sum(0.5 * d * c + self.lam * rF))


#: The state's arrays a view holds: the state's own when unshrunk, compact copies when shrunk.
_STATE_ARRAYS = (
    "beta",
    "z",
    "e",
    "ub",
    "pt",
    "var_pos",
    "var_neg",
    "gamma",
    "v",
    "diag",
    "F",
    "Dg",
    "Z1",
    "V2",
    "X2",
    "Ri",
)


class _View:
    """The arrays one call of the jitted loop works on.

    Unshrunk, they are the full state itself; shrunk, compact copies for the
    active variables and the points they belong to (``cmap``: position ->
    point), with ``gconst`` the part of gamma owed to variables left out.
    """

    __slots__ = (
        "avar",
        "cmap",
        "gconst",
        *_STATE_ARRAYS,
        "rows_mode",
        "cache",
        "slot_of",
        "point_of",
        "stamp",
        "bank",
        "row_cache",
        "state",
    )

    @property
    def n_points(self) -> int:
        return int(self.cmap.size)


class _SmoState(Algorithm):
    r"""The state of one solve.

    The dual variables come from the loss's linear pieces
    (:meth:`~mklkit.components.base.Loss.linear_pieces`): with
    :math:`\ell^*(y_i, u) = s_-u` on :math:`[l_i, 0]` and :math:`s_+u` on
    :math:`[0, u_i]` and :math:`\rho = C\gamma`, point ``i`` has a variable
    :math:`\beta \in [0, -l_iU]` with :math:`z = +1`, :math:`e = s_-` when
    :math:`l_i < 0` and one in :math:`[0, u_iU]` with :math:`z = -1`,
    :math:`e = -s_+` when :math:`u_i > 0` (:math:`U = 1/C`); the first
    variable of every point comes first (index ``i``), the second ones
    after.  The hinge gives one variable per point with :math:`z = y`,
    :math:`e = 1`, the ε-insensitive loss two (SMO-MKL §5.3).  Since
    :math:`s_- \le s_+`, :math:`e^\top\beta \le -\sum_i\ell^*(y_i, -\rho_i)/C`: the
    dual value is a lower bound of the dual (48) at :math:`\rho`.
    """

    def __init__(self, engine: Any, problem: Problem, run: Run, warm_start: SolveResult | None = None) -> None:
        from . import _records, _smo

        super().__init__(engine, problem, run, warm_start)
        self.smo = _smo
        self.U = 1.0 / self.C
        self.reg = self._reg_form(problem.regularizer)
        src = problem.extra.get("kernel_source") if problem.extra else None
        self.source = src
        y = problem.y
        N = problem.n_samples
        if src is None:
            self.K = problem.K
            self.diag = np.ascontiguousarray(np.diagonal(self.K, axis1=1, axis2=2))
            M = self.K.shape[0]
        else:
            self.K = np.zeros((1, 1, 1))
            self.diag = np.ascontiguousarray(src.diag(), dtype=np.float64)
            M = src.n_kernels
        self.M, self.N = M, N
        const = np.all(self.diag == self.diag[:, :1], axis=1)
        self.nck = np.ascontiguousarray(np.flatnonzero(~const), dtype=np.int64)
        self.dconst = np.ascontiguousarray(np.where(const, self.diag[:, 0], 0.0))
        # dual variables (class docstring): the first of every point, then the second ones
        lo, hi, s_lo, s_hi = problem.loss.linear_pieces(y)
        self.pieces = (lo, hi, s_lo, s_hi)
        down = lo < 0.0
        both = down & (hi > 0.0)
        second = np.flatnonzero(both).astype(np.int64)
        n = N + second.size
        self.z = np.concatenate([np.where(down, 1.0, -1.0), -np.ones(second.size)])
        self.e = np.concatenate([np.where(down, s_lo, -s_hi), -s_hi[second]])
        self.ub = np.concatenate([np.where(down, -lo, hi), hi[second]]) * self.U
        self.pt = np.concatenate([np.arange(N), second]).astype(np.int64)
        self.var_pos = np.arange(N, dtype=np.int64)
        self.var_neg = np.full(N, -1, dtype=np.int64)
        self.var_neg[second] = N + np.arange(second.size)
        self.n = n
        self.beta = np.zeros(n)
        self.gamma = np.zeros(N)
        self.v = np.zeros((M, N))
        self.c = np.zeros(M)
        self.d = np.zeros(M)
        self.u1 = np.zeros(M)
        self.u2 = np.zeros(M)
        self.F = np.zeros(N)
        self.Dg = np.zeros(N)
        self.Z1 = np.zeros(N)
        self.V2 = np.zeros(N)
        self.X2 = np.zeros(N)
        self.Ri = np.zeros(N)
        self.wa = np.zeros(M)
        self.ww = np.zeros(M)
        self.wc = np.zeros(M)
        self.istate = np.zeros(_smo.IS_LEN, dtype=np.int64)
        self.fout = np.zeros(_smo.FO_LEN)
        p = engine.get_params()
        self.eps = float(p["kkt_tol"])
        # SMO steps between exact refreshes of the sums and shrinking steps (LibSVM's interval),
        # and between history records (with a certified gap whenever nothing is shrunk)
        self.refresh_every = int(p["check_every"]) or int(min(max(n, 100), 1000))
        self.record_every = int(p["check_every"]) or int(max(1, min(self.refresh_every, n // _RECORDS_PER_PASS)))
        self.shrinking = bool(p["shrinking"])
        self.cache_bytes = float(p["cache_mb"]) * 2**20
        self.n_syncs = 0
        import numba

        threads = self.threads = numba.get_num_threads()
        mode = p["parallel"]
        self.par = threads > 1 and (mode == "on" or (mode == "auto" and M * N >= _PARALLEL_WORK))
        self.nb = int(max(1, min(4 * threads, N // 16))) if self.par else 1
        if src is None:
            e_i = np.zeros(1, dtype=np.int64)
            e_f = np.zeros(1)
            self.rows = _records.FeatureRows(
                xr_ptr=e_i,
                xr_idx=e_i,
                xr_val=e_f,
                xc_ptr=e_i,
                xc_idx=e_i,
                xc_val=e_f,
                g_fptr=e_i,
                g_feat=e_i,
                g_sqn=np.zeros((1, 1)),
                k_group=e_i,
                k_fam=e_i,
                k_par=np.zeros((1, 4)),
                k_pn=np.zeros((0, 0)),
                xi=e_f,
                acc=np.zeros((1, 1)),
            )
        else:
            self.rows = src.feature_rows()
        self._flat: np.ndarray | None = None  # row cache storage, allocated on first use
        self._epochs: list[tuple[np.ndarray, np.ndarray]] = []  # points left out, gamma then
        self.opts = _records.SmoOptions(
            reg_mode=int(self.reg.mode),
            rows_mode=_smo.ROWS_PRECOMPUTED,
            max_steps=0,
            analytic=bool(p["analytic"]),
            parallel=bool(self.par),
            nblocks=int(self.nb),
            eps=self.eps,
            q=float(self.reg.q),
            lam=float(self.reg.lam),
            fd0=float(self.reg.fd0),
            tau=1e-12,
        )
        self.fns = _records.bregman_fns(self.reg.bregman, self.reg.bpar)
        self.work = _records.SmoWork(self.wa, self.ww, self.wc)
        self.view = self._full_view()
        # the full state's records, which the exact refreshes work on whatever the view
        self._full = (self.view.bank, self.view.state)
        if warm_start is not None:
            self._warm(warm_start)
        self._refresh()

    # -- setup -----------------------------------------------------------------
    def _reg_form(self, reg: Any) -> _Reg:
        smo = self.smo
        if PNORM_PENALTY.holds(reg):
            wn = reg.weight_norm
            p = float(wn.p)
            return _Reg(
                smo.REG_PNORM, p / (p - 1.0), float(wn.lam), 0.0, 0.0, 0.0, np.zeros(1), smo.no_function, None, wn
            )
        b = reg.bregman
        pv = np.ascontiguousarray(reg.param_vector, dtype=np.float64)
        if pv.size == 0:
            pv = np.zeros(1)
        d0 = float(b.d0(pv))
        fd0 = float(np.asarray(b.f(np.array([d0]), pv))[0])
        Fd0 = float(np.asarray(b.F(np.array([d0]), pv))[0])
        return _Reg(smo.REG_BREGMAN, 2.0, 0.5, fd0, Fd0, d0, pv, b.finv, b.F, reg, b)

    def _cache_for(self, npts: int) -> tuple[np.ndarray, int]:
        """A row cache of (slots, M, npts) inside the ``cache_mb`` budget (at least 2 rows)."""
        row = 8 * self.M * npts
        slots = int(max(2, min(npts, self.cache_bytes // max(row, 1))))
        if 2 * row > self.cache_bytes and self._flat is None:
            logger.warning(
                "cache_mb=%g holds fewer than two kernel rows (%d bytes each); using two", self.cache_bytes / 2**20, row
            )
        if self._flat is not None and self._flat.size >= 2 * self.M * npts:
            # a later (compact) view fits in the storage it has: a new allocation would leave
            # the old one's pages to the earlier view and touch as many fresh ones
            slots = min(slots, self._flat.size // (self.M * npts))
        need = slots * self.M * npts
        if self._flat is None or self._flat.size < need:
            self._flat = np.empty(need)
        return self._flat[:need].reshape(slots, self.M, npts), slots

    def _full_view(self) -> _View:
        smo = self.smo
        w = _View()
        w.avar = np.arange(self.n, dtype=np.int64)
        w.cmap = np.arange(self.N, dtype=np.int64)
        for name in _STATE_ARRAYS:
            setattr(w, name, getattr(self, name))
        w.gconst = np.zeros(self.N)
        if self.source is None:
            w.rows_mode = smo.ROWS_PRECOMPUTED
            w.cache = np.zeros((1, 1, 1))
            slots = 1
        else:
            w.rows_mode = smo.ROWS_FEATURES
            w.cache, slots = self._cache_for(self.N)
        w.slot_of = np.full(self.N, -1, dtype=np.int64)
        w.point_of = np.full(slots, -1, dtype=np.int64)
        w.stamp = np.zeros(slots, dtype=np.int64)
        return self._with_records(w)

    def _compact_view(self, avar: np.ndarray) -> _View:
        """Compact copies for the active variables ``avar`` (global indices, sorted)."""
        smo = self.smo
        w = _View()
        w.avar = avar
        apt = np.unique(self.pt[avar])
        ipos = np.full(self.N, -1, dtype=np.int64)
        ipos[apt] = np.arange(apt.size)
        vpos = np.full(self.n, -1, dtype=np.int64)
        vpos[avar] = np.arange(avar.size)
        w.cmap = np.ascontiguousarray(apt, dtype=np.int64)
        w.beta = np.ascontiguousarray(self.beta[avar])
        w.z = np.ascontiguousarray(self.z[avar])
        w.e = np.ascontiguousarray(self.e[avar])
        w.ub = np.ascontiguousarray(self.ub[avar])
        w.pt = np.ascontiguousarray(ipos[self.pt[avar]])
        w.var_pos = np.ascontiguousarray(vpos[self.var_pos[apt]])
        neg = self.var_neg[apt]
        w.var_neg = np.ascontiguousarray(np.where(neg >= 0, vpos[np.maximum(neg, 0)], -1))
        # gamma owed to the variables left out
        gc = np.zeros(apt.size)
        for vars_, comp in ((self.var_pos[apt], w.var_pos), (neg, w.var_neg)):
            out = (vars_ >= 0) & (comp < 0)
            gc[out] += self.z[vars_[out]] * self.beta[vars_[out]]
        w.gconst = gc
        w.gamma = np.ascontiguousarray(self.gamma[apt])
        w.v = np.ascontiguousarray(self.v[:, apt])
        w.diag = np.ascontiguousarray(self.diag[:, apt])
        for name in ("F", "Dg", "Z1", "V2"):
            setattr(w, name, np.ascontiguousarray(getattr(self, name)[apt]))
        w.X2 = np.zeros(apt.size)
        w.Ri = np.zeros(apt.size)
        w.rows_mode = smo.ROWS_GATHER if self.source is None else smo.ROWS_FEATURES
        w.cache, slots = self._cache_for(apt.size)
        w.slot_of = np.full(apt.size, -1, dtype=np.int64)
        w.point_of = np.full(slots, -1, dtype=np.int64)
        w.stamp = np.zeros(slots, dtype=np.int64)
        return self._with_records(w)

    def _with_records(self, w: _View) -> _View:
        """``w`` with the records the jitted loops take (checked once per view)."""
        from ._records import RowCache, SmoBank, SmoState, check_record

        w.bank = check_record(SmoBank(self.K, w.diag, self.nck, self.dconst, w.cmap))
        w.row_cache = check_record(RowCache(w.cache, w.slot_of, w.point_of, w.stamp))
        w.state = check_record(
            SmoState(
                w.beta,
                w.z,
                w.e,
                w.ub,
                w.pt,
                w.var_pos,
                w.var_neg,
                w.gconst,
                w.gamma,
                w.v,
                self.c,
                self.d,
                self.u1,
                self.u2,
                w.F,
                w.Dg,
                w.Z1,
                w.V2,
                w.X2,
                w.Ri,
                self.istate,
                self.fout,
            )
        )
        return w

    def _warm(self, ws: SolveResult) -> None:
        rho = getattr(ws, "dual", None)
        if rho is None or np.shape(rho) != (self.N,):
            logger.info("warm start ignored: it has no dual point of length %d", self.N)
            return
        g = np.asarray(rho, dtype=np.float64) / self.C  # gamma in the paper's scale
        beta = np.clip(self.z * g[self.pt], 0.0, self.ub)
        gamma = np.bincount(self.pt, weights=self.z * beta, minlength=self.N)
        if abs(float(np.sum(gamma))) > 1e-9 * max(1.0, float(np.sum(np.abs(gamma)))):
            logger.info("warm start ignored: its dual point does not satisfy the bias constraint")
            return
        self.beta[:] = beta
        self.gamma[:] = gamma
        self._sync(np.arange(self.N, dtype=np.int64))

    def _sync(self, points: np.ndarray, since: np.ndarray | None = None) -> None:
        """v = K gamma made exact at the given points.

        From scratch, or (``since``: the gamma at which v was last exact there)
        by adding the contributions of the points whose gamma changed since.
        """
        pts = np.ascontiguousarray(points, dtype=np.int64)
        if not pts.size:
            return
        if since is None:
            sv = np.ascontiguousarray(np.flatnonzero(self.gamma), dtype=np.int64)
            gsv = np.ascontiguousarray(self.gamma[sv])
        else:
            delta = self.gamma - since
            sv = np.ascontiguousarray(np.flatnonzero(delta), dtype=np.int64)
            gsv = np.ascontiguousarray(delta[sv])
            if not sv.size:
                return
        add = since is not None
        if self.source is None:
            if self.threads > 1 and self.M > 1 and self.M * pts.size * sv.size >= _PARALLEL_WORK:
                self.smo.sync_precomputed_parallel(self.K, sv, gsv, pts, pts.size, add, self.v)
            else:
                self.smo.sync_precomputed(self.K, sv, gsv, pts, pts.size, add, self.v)
        else:
            self.smo.sync_features(self.par, self.rows, sv, gsv, pts, add, self.v)

    def _refresh(self) -> None:
        """Exact c from v and the sums on all points (only when nothing is shrunk)."""
        self.smo.refresh(self.opts, self.fns, *self._full)

    # -- shrinking -----------------------------------------------------------------
    @property
    def shrunk(self) -> bool:
        return self.view.avar.size < self.n

    def _writeback(self) -> None:
        """Copy a compact view's variables and kernel sums back into the full state."""
        w = self.view
        if not self.shrunk:
            return
        self.beta[w.avar] = w.beta
        self.gamma[w.cmap] = w.gamma
        self.v[:, w.cmap] = w.v
        for name in ("F", "Dg", "Z1", "V2"):
            getattr(self, name)[w.cmap] = getattr(w, name)

    def _scores(self, act: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        z, b, u = self.z[act], self.beta[act], self.ub[act]
        S = z * self.e[act] - self.F[self.pt[act]]
        up = np.where(z > 0, b < u, b > 0)
        low = np.where(z > 0, b > 0, b < u)
        return S, up, low

    def _violation(self) -> float:
        """Maximal KKT violation max_up S - min_low S over all variables (full state)."""
        S, up, low = self._scores(np.arange(self.n))
        if not (np.any(up) and np.any(low)):
            return 0.0
        return float(np.max(S[up]) - np.min(S[low]))

    def _shrink(self) -> None:
        """LibSVM's rule: leave out bound variables that cannot be part of a violating pair."""
        act = self.view.avar
        S, up, low = self._scores(act)
        if not (np.any(up) and np.any(low)):
            return
        gmax = float(np.max(S[up]))
        smin = float(np.min(S[low]))
        drop = (up & ~low & (S < smin)) | (low & ~up & (S > gmax))
        keep = act[~drop]
        if keep.size == 0:
            return
        pts = np.unique(self.pt[keep])
        if pts.size > _SHRINK_FRACTION * self.view.n_points:
            return  # too little to gain for rebuilding the compact copies and the cache
        # v is exact at the points left out now (for the current gamma): remember that gamma,
        # so that bringing them back costs only the changes made while they are out
        out = np.setdiff1d(self.view.cmap, pts, assume_unique=True)
        self._epochs.append((out, self.gamma.copy()))
        self.view = self._compact_view(np.ascontiguousarray(keep, dtype=np.int64))

    def _unshrink(self) -> None:
        """Bring every variable back: v made exact where it was left out."""
        self._writeback()
        for pts, since in self._epochs:
            self._sync(pts, since)
        self._epochs = []
        self.view = self._full_view()
        self.n_syncs += 1
        self._refresh()
