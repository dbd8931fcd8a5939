r"""The loss terms of the inner objective of SpicyMKL.

:class:`_SmoothLoss`: :math:`\sum_i\ell^*(y_i, -\rho_i)` for a loss with a
smooth conjugate (§3.3); :class:`_ConstrainedLoss`: the augmented-Lagrangian
terms of eq. (41) for a loss in the constrained form of eq. (33).  Both give
the iterative method (and :class:`_SmoothLoss` the one-step method) the same
interface: value, derivatives, steps, multipliers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...problem import Problem
from .. import common

__all__ = ["_SmoothLoss", "_ConstrainedLoss"]


class _SmoothLoss:
    r""":math:`\sum_i (w_i\ell)^*(y_i, -\rho_i)` for a loss with a smooth conjugate (§3.3).

    Newton with back-tracking keeps :math:`-\rho` inside the domain because
    the conjugate's gradient is unbounded at a finite boundary.  The weighted
    conjugate (sample weights) is :class:`~mklkit.engines.common.SampleLoss`'s.
    """

    constrained = False

    def __init__(self, problem: Problem, lower: np.ndarray, upper: np.ndarray) -> None:
        self.y = problem.y
        self.sl = common.SampleLoss.of(problem)
        self.lower, self.upper = lower, upper

    def set_gamma(self, gamma: float) -> None:
        """The smooth conjugate does not depend on γ."""

    def begin(self, rho: np.ndarray) -> None:
        """Nothing to prepare."""

    def value(self, rho: np.ndarray, c: float = 0.0) -> float:
        u = -rho
        if np.any(u < self.lower) or np.any(u > self.upper):
            return math.inf
        val = float(np.sum(self.sl.conj(u)))
        return val if not math.isnan(val) else math.inf

    def derivs(self, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Gradient in ρ (twice: full and reduced, equal here), Hessian diagonal, 0."""
        u = common.as_vector(-rho)
        g = -self.sl.conj_grad(u)
        d = self.sl.conj_hess(u)
        return g, g, d, 0.0

    def aux_direction(self, delta: np.ndarray) -> float:
        return 0.0

    def accept(self, c: float) -> None:
        """Nothing to keep between Newton steps."""

    def max_step(self, rho: np.ndarray, delta: np.ndarray) -> float:
        """Largest c with -(rho + c delta) inside the closed domain of the conjugate."""
        u, du = -rho, -delta
        c = math.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            dn = (du < 0) & np.isfinite(self.lower)
            if np.any(dn):
                c = min(c, float(np.min((self.lower[dn] - u[dn]) / du[dn])))
            up = (du > 0) & np.isfinite(self.upper)
            if np.any(up):
                c = min(c, float(np.min((self.upper[up] - u[up]) / du[up])))
        return c

    def ridge(self, g: np.ndarray) -> np.ndarray | None:
        return None

    def bend(self, rho: np.ndarray, delta: np.ndarray, boundary: float) -> np.ndarray | None:
        r"""``delta`` with each coordinate cut to ``boundary`` times its distance to the
        domain boundary (``None`` when no coordinate would leave it)."""
        u, du = -rho, -delta
        room = np.full(u.size, np.inf)
        dn = du < 0
        room[dn] = (self.lower[dn] - u[dn]) / du[dn]
        up = du > 0
        room[up] = (self.upper[up] - u[up]) / du[up]
        if not np.any(room < 1.0 / boundary):
            return None
        return delta * np.minimum(1.0, boundary * room)

    def update_multipliers(self, rho: np.ndarray) -> None:
        """A smooth conjugate has no constraints."""

    def pending_change(self, rho: np.ndarray) -> float:
        return 0.0

    def snapshot(self) -> Any:
        return None

    def restore(self, state: Any) -> None:
        """Nothing changes during an inner solve."""

    def multipliers_copy(self) -> Any:
        return None

    def set_multipliers(self, xi: Any) -> None:
        """A smooth conjugate has no multipliers."""


class _ConstrainedLoss:
    r"""The loss terms of eq. (41) for a loss in the constrained form of eq. (33).

    Per sample, with :math:`w = (u, \tilde u)` and :math:`u = -\rho_i`,

    .. math::
        f_i(w) = \ell_0^*(y_i, w) + \frac1{2\gamma}\sum_j \max(0, \xi_{ij} + \gamma h_j(y_i, w))^2 .

    Newton's method runs on :math:`(\rho, \tilde u)` jointly; the auxiliary
    variables couple only with their own :math:`\rho_i`, so they are
    eliminated from every Newton system by the per-sample Schur complement
    :math:`a_i - c_i^\top E_i^{-1} c_i` of the Hessian
    :math:`\begin{pmatrix} a_i & c_i^\top \\ c_i & E_i\end{pmatrix}` in
    :math:`(u, \tilde u)`; the system stays :math:`N \times N`.  :math:`c_i`
    lies in the range of :math:`E_i` (the block matrix is positive
    semidefinite), so a tiny ridge on :math:`E_i` suffices.  Where
    :math:`E_i` is singular while the gradient in :math:`\tilde u_i` is not
    zero (no constraint active in some direction, e.g. at the start), the
    auxiliary variables of those samples are first minimized out
    (:meth:`minimize_aux`).

    With sample weights :math:`w_i` the conjugate is
    :math:`(w_i\ell)^*(y_i, u) = w_i\ell^*(y_i, u/w_i)`
    (:class:`~mklkit.engines.common.SampleLoss`), so the per-sample function is

    .. math::
        f_i(u, \tilde u) = w_i\,\ell_0^*(y_i, v, \tilde u)
            + \frac1{2\gamma}\sum_j \max(0, \xi_{ij} + \gamma h_j(y_i, v, \tilde u))^2,
        \qquad v = u / w_i :

    its derivatives are those in :math:`(v, \tilde u)` (with :math:`\ell_0^*`
    weighted) with the :math:`u`-row and column divided by :math:`w_i`.
    """

    constrained = True

    def __init__(self, problem: Problem, lower: np.ndarray, upper: np.ndarray) -> None:
        loss = problem.loss
        self.y = problem.y
        self.cc = loss.constrained
        self.p = loss.param_vector
        self.N = self.y.size
        self.B = int(loss.n_cons)
        self.Bp = int(loss.n_aux)
        self.W = 1 + self.Bp
        self.xi = np.zeros((self.N, self.B))
        self.ut = np.zeros((self.N, self.Bp))
        self.dut = np.zeros((self.N, self.Bp))
        self.gamma = 1.0
        self.w = common.SampleLoss.of(problem).w
        width = np.asarray(upper, dtype=np.float64) - np.asarray(lower, dtype=np.float64)
        self.width = np.where(np.isfinite(width) & (width > 0.0), width, np.inf)
        self._E = self._c = self._gu = None

    def set_gamma(self, gamma: float) -> None:
        self.gamma = float(gamma)

    def _weights(self, rows: np.ndarray | None) -> np.ndarray | None:
        if self.w is None:
            return None
        return self.w if rows is None else self.w[rows]

    # -- per-sample penalized function (rows: a subset of samples) ---------------
    def _f(
        self,
        u: np.ndarray,
        ut: np.ndarray,
        xi: np.ndarray,
        gamma: float,
        rows: np.ndarray | None = None,
        lin: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        cc, p = self.cc, self.p
        y = self.y if rows is None else np.ascontiguousarray(self.y[rows])
        n = y.size
        w = self._weights(rows)
        v = common.as_vector(u) if w is None else common.as_vector(np.asarray(u) / w)
        ut = np.ascontiguousarray(ut, dtype=np.float64).reshape(n, self.Bp)
        f = np.asarray(cc.l0(y, v, ut, p), dtype=np.float64)
        if w is not None:
            f = w * f
        h = np.asarray(cc.cons(y, v, ut, p), dtype=np.float64).reshape(n, self.B)
        sp = np.maximum(xi + gamma * h, 0.0)
        f = f + (0.5 / gamma) * np.sum(sp * sp, axis=1)
        if lin is not None:
            f = f + lin[:, 0] * u + (np.sum(lin[:, 1:] * ut, axis=1) if self.Bp else 0.0)
        return f, sp

    def _d(
        self,
        u: np.ndarray,
        ut: np.ndarray,
        sp: np.ndarray,
        gamma: float,
        rows: np.ndarray | None = None,
        lin: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gradient (n, W) and generalized Hessian (n, W, W) in w, and the constraint gradients."""
        cc, p = self.cc, self.p
        B, W = self.B, self.W
        y = self.y if rows is None else np.ascontiguousarray(self.y[rows])
        n = y.size
        w = self._weights(rows)
        v = common.as_vector(u) if w is None else common.as_vector(np.asarray(u) / w)
        ut = np.ascontiguousarray(ut, dtype=np.float64).reshape(n, self.Bp)
        g = np.array(cc.l0_grad(y, v, ut, p), dtype=np.float64).reshape(n, W)
        H = np.array(cc.l0_hess(y, v, ut, p), dtype=np.float64).reshape(n, W, W)
        J = np.array(cc.cons_grad(y, v, ut, p), dtype=np.float64).reshape(n, B, W)
        Hh = np.asarray(cc.cons_hess(y, v, ut, p), dtype=np.float64).reshape(n, B, W, W)
        if w is not None:
            g *= w[:, None]
            H *= w[:, None, None]
        act = (sp > 0.0).astype(np.float64)
        g += np.einsum("nb,nbw->nw", sp, J)
        H += gamma * np.einsum("nb,nbv,nbw->nvw", act, J, J)
        H += np.einsum("nb,nbvw->nvw", sp, Hh)
        if w is not None:  # from (v, u~) to (u, u~): v = u / w
            g[:, 0] /= w
            H[:, 0, :] /= w[:, None]
            H[:, :, 0] /= w[:, None]
            J[:, :, 0] /= w[:, None]
        if lin is not None:
            g += lin
        return g, H, J

    def _minimize(
        self,
        w: np.ndarray,
        first: int,
        xi: np.ndarray,
        gamma: float,
        rows: np.ndarray | None = None,
        lin: np.ndarray | None = None,
        max_iter: int = 50,
    ) -> np.ndarray:
        r"""Minimize :math:`\sum_i f_i(w_i)` over the coordinates ``first:`` of ``w``.

        A semismooth Newton method vectorized over the samples ``rows``,
        with per-sample Armijo back-tracking on the samples still moving.
        Where the generalized Hessian block is singular (no constraint
        active in some direction) the curvature :math:`\gamma\nabla h_j\nabla h_j^\top`
        of the inactive constraints is added, as if they were active (a
        majorizing model), and an accepted unit step is extended by doubling
        while the value keeps decreasing.  Returns the new ``w``.
        """
        w = np.array(w, dtype=np.float64)
        n = w.shape[0]
        rows = np.arange(self.N) if rows is None else np.asarray(rows)
        n_free = self.W - first
        eye = np.eye(n_free)
        live = np.arange(n)  # positions in w still moving
        f, sp = self._f(w[:, 0], w[:, 1:], xi, gamma, rows, lin)
        for _ in range(max_iter):
            if live.size == 0:
                break
            r = rows[live]
            ln = None if lin is None else lin[live]
            wl = w[live]
            g, H, J = self._d(wl[:, 0], wl[:, 1:], sp[live], gamma, r, ln)
            gf = g[:, first:]
            Ef = H[:, first:, first:]
            todo = np.max(np.abs(gf), axis=1) > 1e-12 * (1.0 + np.max(np.abs(g), axis=1))
            live, wl, gf, Ef, J = live[todo], wl[todo], gf[todo], Ef[todo], J[todo]
            if live.size == 0:
                break
            r = rows[live]
            ln = None if lin is None else lin[live]
            xl = xi[live]
            big = 1.0 + gamma + np.max(np.abs(np.diagonal(Ef, axis1=1, axis2=2)), axis=1)
            Ef, sing = self._model(Ef, J, sp[live], gamma, first, big)
            d = -np.linalg.solve(Ef + (1e-12 * big)[:, None, None] * eye, gf[..., None])[..., 0]
            slope = np.sum(gf * d, axis=1)
            sub = (wl, xl, r, ln, first, gamma)
            new_w, new_f, new_sp, unit = self._armijo(sub, d, f[live], slope, sp[live])
            self._extend(sub, d, np.flatnonzero(unit & sing), new_w, new_f, new_sp)
            moved = np.any(new_w != wl, axis=1)
            w[live], f[live], sp[live] = new_w, new_f, new_sp
            live = live[moved]
        return w

    def _model(
        self, Ef: np.ndarray, J: np.ndarray, sp: np.ndarray, gamma: float, first: int, big: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        r"""The Newton matrices of :meth:`_minimize`: where a block is singular the curvature
        :math:`\gamma\nabla h_j\nabla h_j^\top` of the inactive constraints is added, and
        :math:`\gamma I` where that is not enough; the matrices and which were singular."""
        n_free = self.W - first
        mineig = Ef[:, 0, 0] if n_free == 1 else np.linalg.eigvalsh(Ef)[:, 0]
        sing = mineig <= 1e-10 * big
        if np.any(sing):
            inact = (sp[sing] <= 0.0).astype(np.float64)
            Jf = J[sing][:, :, first:]
            Ef = Ef.copy()
            Ef[sing] += gamma * np.einsum("nb,nbv,nbw->nvw", inact, Jf, Jf)
            Es = Ef[sing]
            mineig = Es[:, 0, 0] if n_free == 1 else np.linalg.eigvalsh(Es)[:, 0]
            still = np.flatnonzero(sing)[mineig <= 1e-10 * big[sing]]
            Ef[still] += gamma * np.eye(n_free)
        return Ef, sing

    def _trial(self, sub: tuple, at: np.ndarray, step: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The points ``w + step`` of the samples at positions ``at`` of ``sub`` (the moving
        samples' ``w``, ``xi``, rows, linear terms, first free coordinate, gamma), their
        values and constraint values."""
        wl, xl, r, ln, first, gamma = sub
        trial = wl[at].copy()
        trial[:, first:] += step
        ft, spt = self._f(trial[:, 0], trial[:, 1:], xl[at], gamma, r[at], None if ln is None else ln[at])
        return trial, ft, spt

    def _armijo(
        self, sub: tuple, d: np.ndarray, f0: np.ndarray, slope: np.ndarray, sp0: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-sample Armijo back-tracking along ``d``: the new points, values, constraint
        values, and which samples took the unit step."""
        wl = sub[0]
        n = wl.shape[0]
        t = np.ones(n)
        pend = np.arange(n)
        new_w, new_f, new_sp = wl.copy(), f0.copy(), sp0.copy()
        unit = np.zeros(n, dtype=bool)
        for k in range(60):
            trial, ft, spt = self._trial(sub, pend, t[pend, None] * d[pend])
            good = np.isfinite(ft) & (ft <= f0[pend] + 1e-4 * t[pend] * slope[pend])
            gi = pend[good]
            new_w[gi], new_f[gi], new_sp[gi] = trial[good], ft[good], spt[good]
            if k == 0:
                unit[gi] = True
            pend = pend[~good]
            if pend.size == 0:
                break
            t[pend] *= 0.5
        return new_w, new_f, new_sp, unit

    def _extend(
        self, sub: tuple, d: np.ndarray, grow: np.ndarray, new_w: np.ndarray, new_f: np.ndarray, new_sp: np.ndarray
    ) -> None:
        """Double the accepted unit steps of the samples ``grow`` while the value keeps
        decreasing (the new points, values and constraint values in place)."""
        tg = 1.0
        while grow.size and tg < 1e18:
            tg *= 2.0
            trial, ft, spt = self._trial(sub, grow, tg * d[grow])
            better = np.isfinite(ft) & (ft < new_f[grow])
            gi = grow[better]
            new_w[gi], new_f[gi], new_sp[gi] = trial[better], ft[better], spt[better]
            grow = gi

    # -- the inner-objective interface ---------------------------------------------
    def begin(self, rho: np.ndarray) -> None:
        """Minimize the auxiliary variables out for the current ρ, ξ and γ."""
        if self.Bp == 0:
            return
        w = np.empty((self.N, self.W))
        w[:, 0] = -rho
        w[:, 1:] = self.ut
        self.ut = np.ascontiguousarray(self._minimize(w, 1, self.xi, self.gamma)[:, 1:])

    def value(self, rho: np.ndarray, c: float = 0.0) -> float:
        ut = self.ut + c * self.dut if (self.Bp and c != 0.0) else self.ut
        f, _ = self._f(-np.asarray(rho, dtype=np.float64), ut, self.xi, self.gamma)
        val = float(np.sum(f))
        return val if math.isfinite(val) else math.inf

    def derivs(self, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        r"""Gradient in ρ, the right-hand side of the reduced Newton system, the
        Schur-complement diagonal and :math:`\|\nabla_{\tilde u}\|^2`."""
        u = -np.asarray(rho, dtype=np.float64)
        _, sp = self._f(u, self.ut, self.xi, self.gamma)
        g, H, _ = self._d(u, self.ut, sp, self.gamma)
        a = H[:, 0, 0]
        if self.Bp == 0:
            return -g[:, 0], -g[:, 0], np.maximum(a, 0.0), 0.0
        gu = g[:, 1:]
        E = H[:, 1:, 1:]
        big = 1.0 + self.gamma + np.max(np.abs(np.diagonal(E, axis1=1, axis2=2)), axis=1)
        mineig = E[:, 0, 0] if self.Bp == 1 else np.linalg.eigvalsh(E)[:, 0]
        bad = np.flatnonzero(
            (mineig <= 1e-10 * big) & (np.max(np.abs(gu), axis=1) > 1e-12 * (1.0 + np.max(np.abs(g), axis=1)))
        )
        if bad.size:
            # no curvature where the gradient points: minimize those auxiliaries out first
            w = np.empty((bad.size, self.W))
            w[:, 0] = u[bad]
            w[:, 1:] = self.ut[bad]
            self.ut[bad] = self._minimize(w, 1, self.xi[bad], self.gamma, rows=bad)[:, 1:]
            _, sp = self._f(u, self.ut, self.xi, self.gamma)
            g, H, _ = self._d(u, self.ut, sp, self.gamma)
            a, gu, E = H[:, 0, 0], g[:, 1:], H[:, 1:, 1:]
        c = H[:, 1:, 0]
        E = E + (1e-12 * big)[:, None, None] * np.eye(self.Bp)
        sol = np.linalg.solve(E, np.concatenate([c[..., None], gu[..., None]], axis=2))
        sens, eg = sol[..., 0], sol[..., 1]  # E^{-1} c, E^{-1} g_ut
        self._sens, self._eg, self._gu = sens, eg, gu
        d = a - np.sum(c * sens, axis=1)
        # rho-rows of the reduced system: -g_u + c'E^{-1}g_ut enters with u = -rho
        g_red = -g[:, 0] + np.sum(c * eg, axis=1)
        return -g[:, 0], g_red, np.maximum(d, 0.0), float(np.sum(gu * gu))

    def aux_direction(self, delta: np.ndarray) -> float:
        r"""Back-substitute :math:`\Delta\tilde u_i = E_i^{-1}(c_i\Delta\rho_i - g_{\tilde u,i})`;
        returns :math:`\nabla_{\tilde u}^\top\Delta\tilde u` (part of the slope)."""
        if self.Bp == 0:
            return 0.0
        self.dut = self._sens * delta[:, None] - self._eg
        return float(np.sum(self._gu * self.dut))

    def accept(self, c: float) -> None:
        if self.Bp:
            self.ut = self.ut + c * self.dut

    def max_step(self, rho: np.ndarray, delta: np.ndarray) -> float:
        return math.inf

    def bend(self, rho: np.ndarray, delta: np.ndarray, boundary: float) -> None:
        return None

    def ridge(self, g: np.ndarray) -> np.ndarray:
        r"""Per-sample Levenberg–Marquardt ridge :math:`|g_i|/w_i` (:math:`w_i`: width of the
        conjugate's domain): a sample on a linear piece of the conjugate moves
        at most about the width of its domain per Newton step.  ``inf`` where
        the domain is unbounded (the global ridge applies there)."""
        finite = np.isfinite(self.width)
        return np.where(finite, np.abs(g) / np.where(finite, self.width, 1.0), np.inf)

    def update_multipliers(self, rho: np.ndarray) -> None:
        r""":math:`\xi \leftarrow \max(0, \xi + \gamma h)` (eq. 40 with the sign of eq. 32)."""
        _, sp = self._f(-np.asarray(rho, dtype=np.float64), self.ut, self.xi, self.gamma)
        self.xi = sp

    def pending_change(self, rho: np.ndarray) -> float:
        r""":math:`\|\xi^+ - \xi\|^2` that the multiplier update would make at ρ."""
        _, sp = self._f(-np.asarray(rho, dtype=np.float64), self.ut, self.xi, self.gamma)
        return float(np.sum((sp - self.xi) ** 2))

    def snapshot(self) -> Any:
        return self.ut.copy()

    def restore(self, state: Any) -> None:
        self.ut = state.copy()

    def multipliers_copy(self) -> np.ndarray:
        return self.xi.copy()

    def set_multipliers(self, xi: np.ndarray) -> None:
        self.xi = xi.copy()

    def estimate_multipliers(self, z: np.ndarray, rho: np.ndarray) -> np.ndarray:
        r"""Multipliers ξ and a dual point consistent with the predictions ``z`` (warm starts).

        At a solution, :math:`u_i` maximizes :math:`z_iu - \ell^*(y_i, u)`, i.e.
        solves :math:`\min\{\ell_0^*(y_i, w) - z_iu : h(y_i, w) \le 0\}`, and ξ
        are its multipliers.  Each sample's small problem is solved by the
        same augmented-Lagrangian iteration (γ = 1, 10, ..., 10^8), vectorized
        over samples.  Sets ξ and the auxiliary variables; returns
        :math:`\rho = -u`.
        """
        lin = np.zeros((self.N, self.W))
        lin[:, 0] = -np.asarray(z, dtype=np.float64)
        w = np.zeros((self.N, self.W))
        w[:, 0] = -np.asarray(rho, dtype=np.float64)
        w[:, 1:] = self.ut
        xi = np.zeros((self.N, self.B))
        for k in range(9):
            gamma = 10.0**k
            w = self._minimize(w, 0, xi, gamma, lin=lin)
            _, sp = self._f(w[:, 0], w[:, 1:], xi, gamma)
            done = float(np.max(np.abs(sp - xi))) <= 1e-10 * (1.0 + float(np.max(np.abs(sp))))
            xi = sp
            if done and k >= 2:
                break
        self.xi = xi
        self.ut = np.ascontiguousarray(w[:, 1:])
        return -w[:, 0]
