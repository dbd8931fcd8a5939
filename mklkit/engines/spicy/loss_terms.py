r"""The loss terms of SpicyMKL's inner objective, with one interface: :class:`_SmoothLoss`
(:math:`\sum_i\ell^*(y_i, -\rho_i)`, §3.3) and :class:`_ConstrainedLoss` (eq. 41 for the
constrained form of eq. 33).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...problem import Problem
from .. import common


class _LossTerms:
    """What a loss without auxiliaries, multipliers or a bounded domain does: nothing."""

    def _nothing(self, *args: Any) -> None:
        return None

    def _zero(self, *args: Any) -> float:
        return 0.0

    def max_step(self, rho: np.ndarray, delta: np.ndarray) -> float:
        return math.inf

    set_gamma = begin = accept = update_multipliers = snapshot = restore = ridge = bend = _nothing
    aux_direction = pending_change = _zero


class _SmoothLoss(_LossTerms):
    r""":math:`\sum_i (w_i\ell)^*(y_i, -\rho_i)` for a loss with a smooth conjugate (§3.3), whose
    unbounded gradient at a finite boundary keeps Newton with back-tracking inside."""

    constrained = False

    def __init__(self, problem: Problem, lower: np.ndarray, upper: np.ndarray) -> None:
        self.sl = common.SampleLoss.of(problem)
        self.lower, self.upper = lower, upper

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

    def room(self, rho: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Per coordinate, the largest c with -(rho + c delta) in the closed domain."""
        u, du = -rho, -delta
        room = np.full(u.size, np.inf)
        dn = du < 0
        room[dn] = (self.lower[dn] - u[dn]) / du[dn]
        up = du > 0
        room[up] = (self.upper[up] - u[up]) / du[up]
        return room

    def max_step(self, rho: np.ndarray, delta: np.ndarray) -> float:
        """The largest c with -(rho + c delta) in the closed domain."""
        return float(np.min(self.room(rho, delta), initial=math.inf))

    def bend(self, rho: np.ndarray, delta: np.ndarray, boundary: float) -> np.ndarray | None:
        r"""``delta`` with each coordinate cut to ``boundary`` times its distance to the
        domain boundary (``None`` when no coordinate would leave it)."""
        room = self.room(rho, delta)
        if not np.any(room < 1.0 / boundary):
            return None
        return delta * np.minimum(1.0, boundary * room)


class _ConstrainedLoss(_LossTerms):
    r"""The terms of eq. (41) for the constrained form of eq. (33): per sample, with
    :math:`w = (u, \tilde u)`, :math:`u = -\rho_i`,
    :math:`f_i(w) = \ell_0^*(y_i, w) + \frac1{2\gamma}\sum_j\max(0, \xi_{ij} + \gamma h_j(y_i, w))^2`.
    The auxiliaries are eliminated from the Newton system by the per-sample Schur complement
    (minimized out first where their block is singular); sample weights enter through
    :math:`v = u/w_i` (``docs/engines.md``, "Constrained losses").
    """

    constrained = True

    def __init__(self, problem: Problem, lower: np.ndarray, upper: np.ndarray) -> None:
        loss = problem.loss
        self.y, self.cc, self.p = problem.y, loss.constrained, loss.param_vector
        self.w = common.SampleLoss.of(problem).w
        self.N, self.B, self.Bp = self.y.size, int(loss.n_cons), int(loss.n_aux)
        self.W = 1 + self.Bp
        self.xi = np.zeros((self.N, self.B))
        self.ut, self.dut = np.zeros((self.N, self.Bp)), np.zeros((self.N, self.Bp))
        self.gamma = 1.0
        width = np.asarray(upper, dtype=np.float64) - np.asarray(lower, dtype=np.float64)
        self.width = np.where(np.isfinite(width) & (width > 0.0), width, np.inf)
        self._gu = None

    def set_gamma(self, gamma: float) -> None:
        self.gamma = float(gamma)

    def _at(self, u: np.ndarray, ut: np.ndarray, rows: np.ndarray | None) -> tuple:
        """The labels, :math:`v = u/w`, the auxiliaries and the weights of the samples ``rows``."""
        y = self.y if rows is None else np.ascontiguousarray(self.y[rows])
        w = None if self.w is None else (self.w if rows is None else self.w[rows])
        v = common.as_vector(u) if w is None else common.as_vector(np.asarray(u) / w)
        return y, v, np.ascontiguousarray(ut, dtype=np.float64).reshape(y.size, self.Bp), w

    def _f(self, u, ut, xi, gamma: float, rows=None, lin=None) -> tuple[np.ndarray, np.ndarray]:
        """:math:`f_i` of the samples ``rows`` (plus ``lin`` times w) and the penalty's active parts."""
        cc, p = self.cc, self.p
        y, v, ut, w = self._at(u, ut, rows)
        n = y.size
        f = np.asarray(cc.l0(y, v, ut, p), dtype=np.float64)
        if w is not None:
            f = w * f
        h = np.asarray(cc.cons(y, v, ut, p), dtype=np.float64).reshape(n, self.B)
        sp = np.maximum(xi + gamma * h, 0.0)
        f = f + (0.5 / gamma) * np.sum(sp * sp, axis=1)
        if lin is not None:
            f = f + lin[:, 0] * u + (np.sum(lin[:, 1:] * ut, axis=1) if self.Bp else 0.0)
        return f, sp

    def _d(self, u, ut, sp, gamma: float, rows=None, lin=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gradient (n, W) and generalized Hessian (n, W, W) in w, and the constraint gradients."""
        cc, p = self.cc, self.p
        B, W = self.B, self.W
        y, v, ut, w = self._at(u, ut, rows)
        n = y.size
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

    def _minimize(self, w, first: int, xi, gamma: float, rows=None, lin=None, max_iter: int = 50) -> np.ndarray:
        r"""``w`` with :math:`\sum_i f_i(w_i)` minimized over its coordinates ``first:``: semismooth
        Newton vectorized over the samples ``rows``, per-sample Armijo back-tracking; unit steps
        on a singular block (:meth:`_model`) are extended by doubling."""
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

    def _model(self, Ef, J, sp, gamma: float, first: int, big) -> tuple[np.ndarray, np.ndarray]:
        r"""The Newton matrices of :meth:`_minimize` and which were singular: there the inactive
        constraints' curvature :math:`\gamma\nabla h_j\nabla h_j^\top` is added (a majorizing
        model), and :math:`\gamma I` where that is not enough."""
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
        """``w + step`` at the positions ``at`` of ``sub`` (the moving samples' ``w``, ``xi``, rows,
        linear terms, first free coordinate, gamma), its values and penalty parts."""
        wl, xl, r, ln, first, gamma = sub
        trial = wl[at].copy()
        trial[:, first:] += step
        ft, spt = self._f(trial[:, 0], trial[:, 1:], xl[at], gamma, r[at], None if ln is None else ln[at])
        return trial, ft, spt

    def _armijo(self, sub: tuple, d, f0, slope, sp0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-sample Armijo back-tracking along ``d``: the new points, values, penalty parts, and
        which samples took the unit step."""
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

    def _extend(self, sub: tuple, d, grow, new_w, new_f, new_sp) -> None:
        """Double the unit steps of the samples ``grow`` while the value decreases (in place)."""
        tg = 1.0
        while grow.size and tg < 1e18:
            tg *= 2.0
            trial, ft, spt = self._trial(sub, grow, tg * d[grow])
            better = np.isfinite(ft) & (ft < new_f[grow])
            gi = grow[better]
            new_w[gi], new_f[gi], new_sp[gi] = trial[better], ft[better], spt[better]
            grow = gi

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
        r"""Gradient in ρ, right-hand side of the reduced Newton system, Schur-complement diagonal
        and :math:`\|\nabla_{\tilde u}\|^2`."""
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
        r""":math:`\nabla_{\tilde u}^\top\Delta\tilde u`, the auxiliaries' step
        :math:`\Delta\tilde u_i = E_i^{-1}(c_i\Delta\rho_i - g_{\tilde u,i})` kept."""
        if self.Bp == 0:
            return 0.0
        self.dut = self._sens * delta[:, None] - self._eg
        return float(np.sum(self._gu * self.dut))

    def accept(self, c: float) -> None:
        if self.Bp:
            self.ut = self.ut + c * self.dut

    def ridge(self, g: np.ndarray) -> np.ndarray:
        """Per-sample Levenberg–Marquardt ridge: ``|g|`` over the width of the conjugate's domain
        (``inf`` where unbounded)."""
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
        return self.ut.copy(), self.xi.copy()

    def restore(self, state: Any) -> None:
        self.ut, self.xi = state[0].copy(), state[1].copy()

    def estimate_multipliers(self, z: np.ndarray, rho: np.ndarray) -> np.ndarray:
        r"""ρ with the multipliers ξ and auxiliaries (set) consistent with the predictions ``z``: each
        sample's :math:`\min\{\ell_0^*(y_i, w) - z_iu : h(y_i, w) \le 0\}` by the same augmented
        Lagrangian (γ = 1, 10, ..., 10^8), vectorized over samples."""
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
