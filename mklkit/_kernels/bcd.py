r"""Jitted loops of the primal block-coordinate-descent engine (``mklkit.engines.bcd``).

The problem is the MKL primal in the coordinates :math:`\beta_m = L_m^\top\alpha_m`
of a factor bank :math:`K_m = L_mL_m^\top` (a generalized group lasso)

.. math::
    \min_{\beta, b}\ \sum_i \ell(y_i, z_i) + \sum_m \tilde g_C(\|\beta_m\|_2),
    \qquad z = \sum_m L_m\beta_m + b.

The factors are stored transposed, :math:`L^\top` of shape (R, N), block
``m`` being the rows ``starts[m]:starts[m + 1]``: either a C-contiguous
array (``LT``) or the CSR arrays ``indptr``, ``indices``, ``data``.

:func:`solve_ws` runs a whole working-set solve in one call: block
coordinate descent on the blocks of the working set and the bias, either on
the loss itself (``METHOD_BCD``: the block gradient
:math:`L_m^\top\ell'(z)` is refreshed after every block, from component
calls on the samples the block touches) or on the local quadratic model of
the loss (``METHOD_NEWTON``: proximal Newton, Lee, Sun & Saunders 2014,
with an Armijo line search on the true objective).  Both use Anderson
extrapolation of the iterates (Anderson 1965; Bertrand & Massias 2021).

The loss is used through its contract only, as first-class functions of
the fixed signature :data:`LOSS_FN`; a non-smooth loss (``KIND_ENVELOPE``)
is replaced by its Moreau envelope, whose derivative is found from the
conjugate (:func:`envelope`).  The regularizer gives ``value`` and ``prox``
(:data:`REG_FN`).  All arrays are C-contiguous float64 (indices int64) so
that the cached signatures match.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types

__all__ = ["LOSS_FN", "REG_FN", "envelope", "loss_terms", "eval_loss", "solve_ws", "scores",
           "block_scores",
           "METHOD_BCD", "METHOD_NEWTON", "KIND_SMOOTH", "KIND_ENVELOPE"]

#: Let LLVM reassociate the reductions so that they vectorize; no assumption
#: about NaN or inf is made (those flags stay off).
_FM = {"reassoc", "contract"}

_EPS = np.finfo(np.float64).eps

METHOD_BCD = 0  # block coordinate descent on the loss itself
METHOD_NEWTON = 1  # proximal Newton: coordinate descent on the quadratic model

KIND_SMOOTH = 0  # value, deriv, deriv2 of the loss
KIND_ENVELOPE = 1  # Moreau envelope of the loss, from its conjugate

# ipar layout
IP_METHOD = 0
IP_SPARSE = 1
IP_BIAS = 2
IP_KIND = 3
IP_MAX_NEWTON = 4  # Newton steps (METHOD_NEWTON)
IP_MAX_EPOCHS = 5  # epochs (METHOD_BCD) or epochs per Newton step
IP_ANDERSON = 6  # iterates combined by Anderson extrapolation (0: off)
IP_CHECK = 7  # METHOD_BCD: check every block step on the loss (no Lipschitz bound)
IP_EXACT_RANK = 8  # METHOD_NEWTON: blocks of at most this rank are minimized exactly
IP_MAX_INNER = 9  # iterations of the exact block minimization
IP_LEN = 10
# fpar layout
FP_C = 0
FP_MU = 1  # smoothing of KIND_ENVELOPE
FP_LIP = 2  # sup of the loss's second derivative (inf: none known)
FP_TOL = 3  # stop when the violation of the working set is below
FP_RATIO = 4  # METHOD_NEWTON: inner tolerance ratio
FP_SCALE = 5  # curvature scale of the violation: a block's step is 1/(scale ||L_m||^2) or less
FP_LEN = 6
# stats layout (written by solve_ws)
ST_EPOCHS = 0
ST_NEWTON = 1
ST_LINE_SEARCH = 2  # step halvings of the line search
ST_ANDERSON = 3  # accepted extrapolations
ST_BACKTRACK = 4  # block curvature increases
ST_STATUS = 5
ST_VIOLATION = 6  # last violation of the working set
ST_DECREASE = 7  # objective decrease over the call
ST_LEN = 8
# status codes
OK = 0
NUMERICAL = 1  # a non-finite value appeared
NO_DESCENT = 2  # the line search found no decrease (rounding level)
CAPPED = 3  # the epoch or Newton-step cap was reached


# ---------------------------------------------------------------------------
# the loss through its contract
# ---------------------------------------------------------------------------
@njit(cache=True)
def _gather(src, idx):  # pragma: no cover - jitted
    out = np.empty(idx.shape[0])
    for j in range(idx.shape[0]):
        out[j] = src[idx[j]]
    return out


@njit(cache=True)
def envelope(y, z, lp, mu, lo, hi, conj, conj_grad, conj_hess, want_value):  # pragma: no cover
    r"""Derivative, curvature and value of the Moreau envelope of the loss.

    .. math::
        \ell_\mu(y, z) = \sup_u\ \{uz - \ell^*(y, u) - \tfrac\mu2 u^2\},\qquad
        \ell_\mu'(y, z) = u^\star(z) \in [\mathrm{lower}, \mathrm{upper}],

    with :math:`u^\star` the root of the decreasing function
    :math:`\varphi(u) = z - \partial_u\ell^*(y, u) - \mu u` on the domain
    :math:`[\mathrm{lower}, \mathrm{upper}]` of the conjugate.  The ends are
    tested first (:math:`\varphi(\mathrm{upper}) \ge 0` gives
    :math:`u^\star = \mathrm{upper}`, :math:`\varphi(\mathrm{lower}) \le 0` gives
    :math:`u^\star = \mathrm{lower}`); an infinite end is replaced by a
    bracket found by doubling steps; then safeguarded Newton steps
    (``conj_hess``) inside the bracket, or bisection, vectorized over the
    samples not yet converged.  At a regular root the curvature is
    :math:`\ell_\mu'' = 1/(\partial_u^2\ell^* + \mu) \le 1/\mu`; where
    :math:`u^\star` sits at an end of the domain or at a kink of
    :math:`\ell^*` (the bracket closes on a jump of :math:`\varphi`) it does
    not move with :math:`z`: the curvature is 0.

    Returns
    -------
    value : ndarray (N,) (empty unless ``want_value``)
    u : ndarray (N,)
    h : ndarray (N,)
    """
    n = z.shape[0]
    u = np.zeros(n)
    h = np.zeros(n)
    a = lo.copy()
    b = hi.copy()
    done = np.zeros(n, dtype=np.bool_)
    idx = np.empty(n, dtype=np.int64)
    # the ends of the domain
    for side in range(2):
        k = 0
        for i in range(n):
            e = b[i] if side == 0 else a[i]
            if np.isfinite(e) and not done[i]:
                idx[k] = i
                k += 1
        if k == 0:
            continue
        sel = idx[:k].copy()
        ends = _gather(b if side == 0 else a, sel)
        g = conj_grad(_gather(y, sel), ends, lp)
        for j in range(k):
            i = sel[j]
            phi = z[i] - g[j] - mu * ends[j]
            if (side == 0 and phi >= 0.0) or (side == 1 and phi <= 0.0):
                u[i] = ends[j]
                done[i] = True
    # brackets for infinite ends: doubling steps away from the finite end (or 0)
    for rnd in range(1100):
        k = 0
        for i in range(n):
            if not done[i] and not (np.isfinite(a[i]) and np.isfinite(b[i])):
                idx[k] = i
                k += 1
        if k == 0:
            break
        sel = idx[:k].copy()
        probe = np.empty(k)
        for j in range(k):
            i = sel[j]
            step = 2.0 ** min(rnd, 1000)
            if not np.isfinite(b[i]):
                probe[j] = (a[i] if np.isfinite(a[i]) else 0.0) + (step if rnd > 0 or
                                                                   np.isfinite(a[i]) else 0.0)
            else:
                probe[j] = b[i] - step
        g = conj_grad(_gather(y, sel), probe, lp)
        for j in range(k):
            i = sel[j]
            phi = z[i] - g[j] - mu * probe[j]
            if phi >= 0.0:
                a[i] = probe[j]
            else:
                b[i] = probe[j]
    # safeguarded Newton inside the brackets
    width0 = np.empty(n)
    for i in range(n):
        if not done[i]:
            u[i] = 0.5 * (a[i] + b[i])
            width0[i] = b[i] - a[i]
    for it in range(400):
        k = 0
        for i in range(n):
            if not done[i]:
                idx[k] = i
                k += 1
        if k == 0:
            break
        sel = idx[:k].copy()
        ys = _gather(y, sel)
        us = _gather(u, sel)
        g = conj_grad(ys, us, lp)
        H = conj_hess(ys, us, lp)
        for j in range(k):
            i = sel[j]
            phi = z[i] - g[j] - mu * u[i]
            scale = abs(z[i]) + abs(g[j]) + mu * abs(u[i])
            if abs(phi) <= 16.0 * _EPS * scale:
                der = H[j] + mu
                h[i] = 1.0 / der if (der > 0.0 and np.isfinite(der)) else 0.0
                done[i] = True
                continue
            if phi > 0.0:
                a[i] = u[i]
            else:  # phi < 0 or nan: the root is below
                b[i] = u[i]
            if b[i] - a[i] <= 4.0 * _EPS * (abs(a[i]) + abs(b[i])) + 1e-15 * width0[i]:
                u[i] = 0.5 * (a[i] + b[i])       # a jump of phi: a kink of the conjugate
                done[i] = True
                continue
            der = H[j] + mu
            un = u[i] + phi / der if (der > 0.0 and np.isfinite(der)) else np.nan
            if not (a[i] < un < b[i]):
                un = 0.5 * (a[i] + b[i])
            u[i] = un
    for i in range(n):  # rounding may not leave the domain
        u[i] = min(max(u[i], lo[i]), hi[i])
    if want_value:
        c = conj(y, u, lp)
        val = np.empty(n)
        for i in range(n):
            val[i] = u[i] * z[i] - c[i] - 0.5 * mu * u[i] * u[i]
    else:
        val = np.empty(0)
    return val, u, h


@njit(cache=True)
def loss_terms(kind, y, z, lp, mu, lo, hi, value, deriv, deriv2, conj, conj_grad, conj_hess,
               want_value, want_curv):  # pragma: no cover - jitted
    r"""Value, derivative and second derivative of the loss in use at ``z``.

    ``KIND_SMOOTH``: the loss's own ``value``, ``deriv``, ``deriv2``;
    ``KIND_ENVELOPE``: its Moreau envelope of smoothing ``mu``
    (:func:`envelope`).  Arrays not asked for are empty.
    """
    if kind == KIND_ENVELOPE:
        return envelope(y, z, lp, mu, lo, hi, conj, conj_grad, conj_hess, want_value)
    v = value(y, z, lp) if want_value else np.empty(0)
    d1 = deriv(y, z, lp)
    d2 = deriv2(y, z, lp) if want_curv else np.empty(0)
    return v, d1, d2


@njit(cache=True)
def _sum_value(kind, y, z, lp, mu, lo, hi, value, deriv, deriv2, conj, conj_grad,
               conj_hess):  # pragma: no cover - jitted
    v, _, _ = loss_terms(kind, y, z, lp, mu, lo, hi, value, deriv, deriv2, conj, conj_grad,
                         conj_hess, True, False)
    return np.sum(v)


# ---------------------------------------------------------------------------
# blocks
# ---------------------------------------------------------------------------
@njit(cache=True, fastmath=_FM)
def _block_grad(sparse, LT, indptr, indices, data, s, e, r, g):  # pragma: no cover - jitted
    r""":math:`g = L_m^\top r` for the rows ``s:e``."""
    if sparse:
        for a in range(s, e):
            acc = 0.0
            for k in range(indptr[a], indptr[a + 1]):
                acc += data[k] * r[indices[k]]
            g[a - s] = acc
    else:
        for a in range(s, e):
            g[a - s] = np.dot(LT[a], r)


@njit(cache=True, fastmath=_FM)
def _block_curv(sparse, LT, indptr, indices, data, s, e, h):  # pragma: no cover - jitted
    r""":math:`\max_a \sum_i h_i L_{ia}^2`: the largest diagonal entry of
    :math:`L_m^\top\mathrm{diag}(h)L_m`, a lower bound of its largest
    eigenvalue (equal to it when the columns have disjoint supports)."""
    best = 0.0
    for a in range(s, e):
        acc = 0.0
        if sparse:
            for k in range(indptr[a], indptr[a + 1]):
                acc += h[indices[k]] * data[k] * data[k]
        else:
            row = LT[a]
            for i in range(row.shape[0]):
                acc += h[i] * row[i] * row[i]
        best = max(best, acc)
    return best


@njit(cache=True)
def _block_image(sparse, LT, indptr, indices, data, s, e, d, w):  # pragma: no cover - jitted
    r""":math:`w \mathrel{+}= L_m d` (``w`` is zero on the block's support before)."""
    for a in range(s, e):
        da = d[a - s]
        if da == 0.0:
            continue
        if sparse:
            for k in range(indptr[a], indptr[a + 1]):
                w[indices[k]] += da * data[k]
        else:
            row = LT[a]
            for i in range(row.shape[0]):
                w[i] += da * row[i]


@njit(cache=True)
def _prox_scale(nv, Ct, rp, reg_prox, one):  # pragma: no cover - jitted
    r"""The factor :math:`\mathrm{prox}_{\tilde g_{C_t}}(\|v\|)/\|v\|` by which the block prox
    scales a block :math:`v` of norm ``nv`` (0 when the block is set to zero)."""
    if not nv > 0.0:
        return 0.0
    one[0] = nv
    p = reg_prox(one, Ct, rp)[0]
    return p / nv if p > 0.0 else 0.0


@njit(cache=True)
def _prox_step(beta, s, e, g, lam, C, rp, reg_prox, one, d):  # pragma: no cover - jitted
    r"""Block step :math:`d = \mathrm{prox}(\|v\| \mid \tilde g_{C/\lambda})\,v/\|v\| - \beta_m`,
    :math:`v = \beta_m - g/\lambda` (rows ``s:e``, gradient ``g[:e - s]``), into ``d``;
    returns :math:`\|d\|^2`.

    Uses :math:`\tilde g_C/\lambda = \tilde g_{C/\lambda}` (the regularizer is linear in C).
    """
    nv2 = 0.0
    for a in range(s, e):
        v = beta[a] - g[a - s] / lam
        nv2 += v * v
    sc = _prox_scale(np.sqrt(nv2), C / lam, rp, reg_prox, one)
    dn2 = 0.0
    for a in range(s, e):
        da = sc * (beta[a] - g[a - s] / lam) - beta[a]
        d[a - s] = da
        dn2 += da * da
    return dn2


@njit(cache=True)
def scores(beta, G, starts, nu, C, rp, reg_prox):  # pragma: no cover - jitted
    r"""Violation of the optimality conditions of every block.

    :math:`\nu_m\|\beta_m - \mathrm{prox}_{\tilde g_C/\nu_m}(\beta_m - g_m/\nu_m)\|`,
    the fixed-point residual of a block step of length :math:`1/\nu_m` with
    gradient ``G[starts[m]:starts[m + 1]]`` (0 exactly at optimality; for a
    zero block of a sparse regularizer it is :math:`(\|g_m\| - t_C)_+`).
    """
    M = starts.shape[0] - 1
    out = np.zeros(M)
    one = np.empty(1)
    rmax = 1
    for m in range(M):
        rmax = max(rmax, starts[m + 1] - starts[m])
    d = np.empty(rmax)
    for m in range(M):
        s = starts[m]
        e = starts[m + 1]
        if e > s and nu[m] > 0.0:
            out[m] = nu[m] * np.sqrt(_prox_step(beta, s, e, G[s:e], nu[m], C, rp, reg_prox, one,
                                                d))
    return out


@njit(cache=True)
def _ws_rows(ws, starts):  # pragma: no cover - jitted
    """The rows of the working set's blocks, and the offsets of each block among them."""
    wseg = np.zeros(ws.shape[0] + 1, dtype=np.int64)
    for k in range(ws.shape[0]):
        wseg[k + 1] = wseg[k] + starts[ws[k] + 1] - starts[ws[k]]
    rows = np.empty(wseg[-1], dtype=np.int64)
    for k in range(ws.shape[0]):
        for j in range(wseg[k + 1] - wseg[k]):
            rows[wseg[k] + j] = starts[ws[k]] + j
    return rows, wseg


@njit(cache=True)
def _pack(beta, bias, rows, out):  # pragma: no cover - jitted
    """The rows of the working set, then the bias, into ``out``."""
    for p in range(rows.shape[0]):
        out[p] = beta[rows[p]]
    out[rows.shape[0]] = bias


@njit(cache=True)
def _unpack(src, rows, beta):  # pragma: no cover - jitted
    """Inverse of :func:`_pack`; returns the bias."""
    for p in range(rows.shape[0]):
        beta[rows[p]] = src[p]
    return src[rows.shape[0]]


@njit(cache=True)
def _reg_sum_packed(packed, wseg, C, rp, reg_value):  # pragma: no cover - jitted
    r""":math:`\sum_{m\in W}\tilde g_C(\|\beta_m\|)` of the rows packed by :func:`_pack`."""
    nW = wseg.shape[0] - 1
    if nW == 0:
        return 0.0
    nrm = np.empty(nW)
    for k in range(nW):
        acc = 0.0
        for p in range(wseg[k], wseg[k + 1]):
            acc += packed[p] * packed[p]
        nrm[k] = np.sqrt(acc)
    return np.sum(reg_value(nrm, C, rp))


@njit(cache=True)
def _reg_sum(beta, rows, wseg, C, rp, reg_value):  # pragma: no cover - jitted
    r""":math:`\sum_{m \in W}\tilde g_C(\|\beta_m\|)`."""
    packed = np.empty(rows.shape[0] + 1)
    _pack(beta, 0.0, rows, packed)
    return _reg_sum_packed(packed, wseg, C, rp, reg_value)


@njit(cache=True)
def _anderson(X):  # pragma: no cover - jitted
    r"""Anderson extrapolation weights from the iterates ``X`` (K + 1, D).

    With :math:`U` the K differences of consecutive iterates, the weights
    :math:`c = (U U^\top)^{-1}\mathbf 1 / \mathbf 1^\top(UU^\top)^{-1}\mathbf 1`
    combine the last K iterates (Anderson 1965; Bertrand & Massias 2021,
    eq. 6).  A tiny ridge keeps the system regular; empty when it is not.
    """
    K = X.shape[0] - 1
    U = np.ascontiguousarray(X[1:] - X[:-1])
    A = U @ U.T
    tr = 0.0
    for k in range(K):
        tr += A[k, k]
    if not (tr > 0.0 and np.isfinite(tr)):
        return np.empty(0)
    for k in range(K):
        A[k, k] += 1e-10 * tr / K
    c = np.linalg.solve(A, np.ones(K))
    s = np.sum(c)
    if not (np.isfinite(s) and s != 0.0):
        return np.empty(0)
    return c / s


# ---------------------------------------------------------------------------
# the working-set solve
# ---------------------------------------------------------------------------
@njit(cache=True)
def _refresh_true(kind, sidx, y, z, lp, mu, lo, hi, r, value, deriv, deriv2, conj, conj_grad,
                  conj_hess):  # pragma: no cover - jitted
    r""":math:`r_i = \ell'(y_i, z_i)` on the samples ``sidx``."""
    _, d1, _ = loss_terms(kind, _gather(y, sidx), _gather(z, sidx), lp, mu, _gather(lo, sidx),
                          _gather(hi, sidx), value, deriv, deriv2, conj, conj_grad, conj_hess,
                          False, False)
    for j in range(sidx.shape[0]):
        r[sidx[j]] = d1[j]


@njit(cache=True)
def _block_min(beta, s, e, g, H, L, C, rp, reg_prox, one, d, work, max_inner):  # pragma: no cover
    r"""Minimize the quadratic model over one block exactly (to a relative residual of
    :math:`10^{-3}`): :math:`\min_d\ g^\top d + \tfrac12 d^\top Hd + \tilde g_C(\|\beta_m + d\|)`.

    Accelerated proximal gradient on the :math:`r_m`-dimensional problem
    (FISTA with the gradient restart of O'Donoghue & Candès 2015), step
    :math:`1/L`, :math:`L \ge \lambda_{\max}(H)`; each iteration costs
    :math:`O(r_m^2)` and touches no sample.  The first iteration is the
    plain block step of :func:`_prox_step`.  Writes ``d``; returns
    :math:`\|d\|^2`.
    """
    rk = e - s
    x = work[0]
    xn = work[1]
    yv = work[2]
    gy = work[3]
    for a in range(rk):
        x[a] = beta[s + a]
        yv[a] = x[a]
    t = 1.0
    res0 = -1.0
    for it in range(max_inner):
        nv2 = 0.0
        for a in range(rk):
            acc = g[a]
            for b in range(rk):
                acc += H[a, b] * (yv[b] - beta[s + b])
            gy[a] = yv[a] - acc / L
            nv2 += gy[a] * gy[a]
        sc = _prox_scale(np.sqrt(nv2), C / L, rp, reg_prox, one)
        res2 = 0.0
        ip = 0.0
        for a in range(rk):
            xn[a] = sc * gy[a]
            res2 += (xn[a] - yv[a]) ** 2
            ip += (yv[a] - xn[a]) * (xn[a] - x[a])
        res = np.sqrt(res2)
        if it == 0:
            res0 = res
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        mom = (t - 1.0) / t_next
        if ip > 0.0:        # gradient restart
            mom = 0.0
            t_next = 1.0
        for a in range(rk):
            yv[a] = xn[a] + mom * (xn[a] - x[a])
            x[a] = xn[a]
        t = t_next
        if not res > 1e-3 * res0:
            break
    dn2 = 0.0
    for a in range(rk):
        d[a] = x[a] - beta[s + a]
        dn2 += d[a] * d[a]
    return dn2


@njit(cache=True)
def _block_hessian(sparse, LT, s, e, m, h, supp_ptr, supp_idx, tptr, tcol, tval, out):  # pragma: no cover
    r""":math:`L_m^\top\mathrm{diag}(h)L_m` into ``out`` (:math:`r_m\times r_m`): a product of
    the weighted rows (dense), or a sum over the block's samples of their rank-one terms
    (sparse, from the sample-major copy ``tptr``/``tcol``/``tval``)."""
    rk = e - s
    if sparse:
        out[:, :] = 0.0
        for j in range(supp_ptr[m], supp_ptr[m + 1]):
            hi = h[supp_idx[j]]
            if hi == 0.0:
                continue
            for p in range(tptr[j], tptr[j + 1]):
                va = hi * tval[p]
                a = tcol[p]
                for q in range(tptr[j], tptr[j + 1]):
                    out[a, tcol[q]] += va * tval[q]
    else:
        A = LT[s:e] * h
        out[:, :] = A @ LT[s:e].T
    for a in range(rk):      # exact symmetry
        for b in range(a):
            v = 0.5 * (out[a, b] + out[b, a])
            out[a, b] = v
            out[b, a] = v


@njit(cache=True)
def _top_eig(H):  # pragma: no cover - jitted
    r"""An upper estimate of :math:`\lambda_{\max}(H)` for a symmetric PSD ``H``: the smaller
    of the Gershgorin bound and 1.02 times 30 power iterations (never below the largest
    diagonal entry)."""
    rk = H.shape[0]
    gers = 0.0
    dmax = 0.0
    for a in range(rk):
        acc = 0.0
        for b in range(rk):
            acc += abs(H[a, b])
        gers = max(gers, acc)
        dmax = max(dmax, H[a, a])
    if rk == 1 or gers == dmax:
        return gers
    v = np.ones(rk) + 1e-3 * np.cos(np.arange(rk) * 1.7)
    lam = 0.0
    for it in range(30):
        u = H @ v
        nu = np.sqrt(np.sum(u * u))
        if nu == 0.0:
            break
        lam = nu / np.sqrt(np.sum(v * v))
        v = u / nu
    return max(dmax, min(gers, 1.02 * lam))


@njit(cache=True)
def _epoch(model, check, kind, sparse, with_bias, ws, starts, lam, LT, indptr, indices, data,
           supp_ptr, supp_idx, allidx, y, lp, mu, lo, hi, C, rp, lip_loss, beta, z, bias, r, h,
           g, d, w, one, stats, Hbuf, hoff, work, max_inner, value, deriv, deriv2, conj,
           conj_grad, conj_hess, reg_prox):  # pragma: no cover - jitted
    r"""One pass of block coordinate descent over the working set, then the bias.

    Block step (prox-gradient on block ``m`` with curvature :math:`\lambda_m`):
    :math:`\beta_m^+ = \mathrm{prox}(\|v\| \mid \tilde g_{C/\lambda_m})\,v/\|v\|`,
    :math:`v = \beta_m - g_m/\lambda_m`.  ``model``: ``r`` is the gradient of the
    quadratic model, :math:`r = r_0 + h\circ(z - z_0)`, and the step is
    accepted when :math:`d^\top L_m^\top\mathrm{diag}(h)L_md \le \lambda_m\|d\|^2`
    (else :math:`\lambda_m` grows and the step is redone: the model then
    decreases monotonically).  Otherwise ``r`` is :math:`\ell'(z)`, refreshed
    on the block's samples; with ``check`` the step must pass the
    sufficient-decrease test of the loss itself.  A block of the model whose
    Hessian :math:`L_m^\top\mathrm{diag}(h)L_m` is at ``Hbuf[hoff[k]:]``
    (``hoff[k] >= 0``) is minimized exactly instead (:func:`_block_min`).
    Returns the largest
    :math:`\lambda_m\|\beta_m^+ - \beta_m\|` and bias gradient seen (the
    violation of the pass), or ``nan`` on a non-finite value.
    """
    N = z.shape[0]
    viol = 0.0
    for k in range(ws.shape[0]):
        m = ws[k]
        s = starts[m]
        e = starts[m + 1]
        if e == s or lam[k] <= 0.0:
            continue
        sidx = supp_idx[supp_ptr[m]:supp_ptr[m + 1]] if sparse else allidx
        _block_grad(sparse, LT, indptr, indices, data, s, e, r, g)
        lamk = lam[k]
        if model and hoff[k] >= 0:
            rk = e - s
            H = Hbuf[hoff[k]:hoff[k] + rk * rk].reshape((rk, rk))
            dn2 = _block_min(beta, s, e, g, H, lamk, C, rp, reg_prox, one, d, work, max_inner)
            if not np.isfinite(dn2):
                return np.nan
            if dn2 == 0.0:
                continue
            _block_image(sparse, LT, indptr, indices, data, s, e, d, w)
            for a in range(s, e):
                beta[a] += d[a - s]
            for i in sidx:
                z[i] += w[i]
                r[i] += h[i] * w[i]
                w[i] = 0.0
            viol = max(viol, lamk * np.sqrt(dn2))
            continue
        for attempt in range(64):
            dn2 = _prox_step(beta, s, e, g, lamk, C, rp, reg_prox, one, d)
            gd = 0.0
            for a in range(e - s):
                gd += g[a] * d[a]
            if dn2 == 0.0:
                break
            if not np.isfinite(dn2):
                return np.nan
            _block_image(sparse, LT, indptr, indices, data, s, e, d, w)
            ok = True
            if model:
                q = 0.0
                for i in sidx:
                    q += h[i] * w[i] * w[i]
                if q > lamk * dn2 * (1.0 + 1e-10):
                    ok = False
                    lamk = max(2.0 * lamk, q / dn2)
            elif check:
                zs = _gather(z, sidx)
                ys = _gather(y, sidx)
                los = _gather(lo, sidx)
                his = _gather(hi, sidx)
                f0 = _sum_value(kind, ys, zs, lp, mu, los, his, value, deriv, deriv2, conj,
                                conj_grad, conj_hess)
                for j in range(sidx.shape[0]):
                    zs[j] += w[sidx[j]]
                f1 = _sum_value(kind, ys, zs, lp, mu, los, his, value, deriv, deriv2, conj,
                                conj_grad, conj_hess)
                slack = 1e-13 * (abs(f0) + abs(gd))
                if not (f1 - f0 <= gd + 0.5 * lamk * dn2 + slack):
                    ok = False
                    lamk *= 2.0
            if not ok:
                stats[ST_BACKTRACK] += 1.0
                for i in sidx:
                    w[i] = 0.0
                continue
            for a in range(s, e):
                beta[a] += d[a - s]
            if model:
                for i in sidx:
                    z[i] += w[i]
                    r[i] += h[i] * w[i]
                    w[i] = 0.0
            else:
                for i in sidx:
                    z[i] += w[i]
                    w[i] = 0.0
                _refresh_true(kind, sidx, y, z, lp, mu, lo, hi, r, value, deriv, deriv2, conj,
                              conj_grad, conj_hess)
            viol = max(viol, lamk * np.sqrt(dn2))
            break
        lam[k] = lamk
    if with_bias:
        gb = np.sum(r)
        viol = max(viol, abs(gb))
        if model:
            hb = np.sum(h)
            if hb > 0.0 and gb != 0.0:
                db = -gb / hb
                bias[0] += db
                for i in range(N):
                    z[i] += db
                    r[i] += h[i] * db
        elif gb != 0.0:
            # Newton step on the bias with the sufficient-decrease test of the loss
            _, _, h2 = loss_terms(kind, y, z, lp, mu, lo, hi, value, deriv, deriv2, conj,
                                  conj_grad, conj_hess, False, True)
            hb = np.sum(h2)
            cb = hb if hb > 0.0 else lip_loss * N
            if not (cb > 0.0 and np.isfinite(cb)):
                cb = N
            f0 = _sum_value(kind, y, z, lp, mu, lo, hi, value, deriv, deriv2, conj, conj_grad,
                            conj_hess)
            zt = np.empty(N)
            for attempt in range(60):
                db = -gb / cb
                for i in range(N):
                    zt[i] = z[i] + db
                f1 = _sum_value(kind, y, zt, lp, mu, lo, hi, value, deriv, deriv2, conj,
                                conj_grad, conj_hess)
                if f1 - f0 <= gb * db + 0.5 * cb * db * db + 1e-13 * abs(f0):
                    bias[0] += db
                    z[:] = zt
                    break
                cb *= 2.0
            _refresh_true(kind, allidx, y, z, lp, mu, lo, hi, r, value, deriv, deriv2, conj,
                          conj_grad, conj_hess)
    return viol


@njit(cache=True)
def _model_value(r0, h, z, z0, beta, rows, wseg, C, rp, reg_value):  # pragma: no cover - jitted
    r"""Quadratic model :math:`r_0^\top\delta + \tfrac12\delta^\top\mathrm{diag}(h)\delta`,
    :math:`\delta = z - z_0`, plus the regularizer on the working set."""
    acc = 0.0
    for i in range(z.shape[0]):
        dz = z[i] - z0[i]
        acc += dz * (r0[i] + 0.5 * h[i] * dz)
    return acc + _reg_sum(beta, rows, wseg, C, rp, reg_value)


@njit(cache=True)
def _true_value(kind, y, z, lp, mu, lo, hi, beta, rows, wseg, C, rp, value, deriv, deriv2, conj,
                conj_grad, conj_hess, reg_value):  # pragma: no cover - jitted
    r""":math:`\sum_i\ell(y_i, z_i)` plus the regularizer on the working set."""
    return (_sum_value(kind, y, z, lp, mu, lo, hi, value, deriv, deriv2, conj, conj_grad,
                       conj_hess) + _reg_sum(beta, rows, wseg, C, rp, reg_value))


@njit(cache=True)
def _coordinate_descent(model, check, kind, sparse, with_bias, max_epochs, n_and, tol, ws,
                        starts, lam, LT, indptr, indices, data, supp_ptr, supp_idx, allidx, y, lp,
                        mu, lo, hi, C, rp, lip_loss, beta, z, bias, r, r0, h, z0, stats, Hbuf,
                        hoff, max_inner, value, deriv, deriv2, conj, conj_grad, conj_hess,
                        reg_value, reg_prox):  # pragma: no cover - jitted
    r"""Epochs of :func:`_epoch` with Anderson extrapolation, until the violation of a
    pass is at most ``tol`` or ``max_epochs`` passes.

    Every ``n_and + 1`` passes the last ``n_and + 1`` iterates (working-set
    rows and bias) give extrapolation weights (:func:`_anderson`) that are
    applied to them and to the predictions; the extrapolated point is kept
    when it lowers the objective (the model's with ``model``).  Returns the
    last violation (``nan`` on a non-finite value) and whether the cap was hit.
    """
    N = z.shape[0]
    rows, wseg = _ws_rows(ws, starts)
    D = rows.shape[0] + 1
    rmax = 1
    for k in range(ws.shape[0]):
        rmax = max(rmax, wseg[k + 1] - wseg[k])
    g = np.empty(rmax)
    d = np.empty(rmax)
    work = np.empty((4, rmax))
    w = np.zeros(N)
    one = np.empty(1)
    KA = n_and + 1
    Xb = np.empty((KA, D)) if n_and > 0 else np.empty((0, D))
    Xz = np.empty((KA, N)) if n_and > 0 else np.empty((0, N))
    fill = 0
    viol = np.inf
    for epoch in range(max_epochs):
        viol = _epoch(model, check, kind, sparse, with_bias, ws, starts, lam, LT, indptr, indices,
                      data, supp_ptr, supp_idx, allidx, y, lp, mu, lo, hi, C, rp, lip_loss, beta,
                      z, bias, r, h, g, d, w, one, stats, Hbuf, hoff, work, max_inner, value,
                      deriv, deriv2, conj, conj_grad, conj_hess, reg_prox)
        stats[ST_EPOCHS] += 1.0
        if not np.isfinite(viol):
            return np.nan, False
        if viol <= tol:
            return viol, False
        if n_and == 0:
            continue
        _pack(beta, bias[0], rows, Xb[fill])
        Xz[fill, :] = z
        fill += 1
        if fill < KA:
            continue
        fill = 0
        c = _anderson(Xb)
        if c.shape[0] == 0:
            continue
        xb = np.zeros(D)
        xz = np.zeros(N)
        for j in range(n_and):
            xb += c[j] * Xb[j + 1]
            xz += c[j] * Xz[j + 1]
        if model:
            f_cur = _model_value(r0, h, z, z0, beta, rows, wseg, C, rp, reg_value)
        else:
            f_cur = _true_value(kind, y, z, lp, mu, lo, hi, beta, rows, wseg, C, rp, value,
                                deriv, deriv2, conj, conj_grad, conj_hess, reg_value)
        keep_b = np.empty(D)
        _pack(beta, bias[0], rows, keep_b)
        bias[0] = _unpack(xb, rows, beta)
        if model:
            f_acc = _model_value(r0, h, xz, z0, beta, rows, wseg, C, rp, reg_value)
        else:
            f_acc = _true_value(kind, y, xz, lp, mu, lo, hi, beta, rows, wseg, C, rp, value,
                                deriv, deriv2, conj, conj_grad, conj_hess, reg_value)
        if f_acc < f_cur:
            stats[ST_ANDERSON] += 1.0
            z[:] = xz
            if model:
                for i in range(N):
                    r[i] = r0[i] + h[i] * (z[i] - z0[i])
            else:
                _refresh_true(kind, allidx, y, z, lp, mu, lo, hi, r, value, deriv, deriv2,
                              conj, conj_grad, conj_hess)
        else:
            bias[0] = _unpack(keep_b, rows, beta)
    return viol, True


@njit(cache=True)
def _ws_violation(sparse, ws, starts, lam, lip, scale, LT, indptr, indices, data, r, beta, C, rp,
                  reg_prox, with_bias):  # pragma: no cover - jitted
    r"""Fixed-point violation of the working set (and bias) at the gradient ``r``, for block
    steps of curvature :math:`\max(\lambda_m, \text{scale}\,\|L_m\|_2^2)` (that of the
    outer loop's scores at least, so that both measure alike)."""
    rmax = 1
    for k in range(ws.shape[0]):
        m = ws[k]
        rmax = max(rmax, starts[m + 1] - starts[m])
    g = np.empty(rmax)
    d = np.empty(rmax)
    one = np.empty(1)
    viol = abs(np.sum(r)) if with_bias else 0.0
    for k in range(ws.shape[0]):
        m = ws[k]
        s = starts[m]
        e = starts[m + 1]
        if e == s or lam[k] <= 0.0:
            continue
        _block_grad(sparse, LT, indptr, indices, data, s, e, r, g)
        nu = max(lam[k], scale * lip[m])
        viol = max(viol, nu * np.sqrt(_prox_step(beta, s, e, g, nu, C, rp, reg_prox, one, d)))
    return viol


_f8 = types.float64
_b1 = types.boolean
_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
_I1 = types.int64[::1]
#: Signature of a loss kernel ``f(y, z_or_u, params)`` passed into the loops.
LOSS_FN = types.FunctionType(_F1(_F1, _F1, _F1))
#: Signature of a regularizer kernel ``f(x, C, params)`` passed into the loops.
REG_FN = types.FunctionType(_F1(_F1, _f8, _F1))


@njit(types.void(_I1, _F1, _I1, _I1, _F1, _F2, _I1, _I1, _F1, _I1, _I1, _I1, _I1, _F1, _F1,
                 _I1, _F1, _F1, _F1, _F1, _F1, _F1, _F1, _F1, _F1, LOSS_FN, LOSS_FN, LOSS_FN,
                 LOSS_FN, LOSS_FN, LOSS_FN, REG_FN, REG_FN),
      cache=True)
def solve_ws(ipar, fpar, ws, starts, lip, LT, indptr, indices, data, supp_ptr, supp_idx, tptr,
             tcol, tval, grams, goff, y, lp, lo, hi, rp, beta, z, bias, stats, value, deriv,
             deriv2, conj, conj_grad, conj_hess, reg_value, reg_prox):  # pragma: no cover

    r"""Solve the problem restricted to the working set ``ws`` (and the bias), in place.

    ``beta`` (R,), ``z`` (N,) and ``bias`` (1,) are the current point and are
    updated; the other blocks stay fixed.  ``lip[m]`` is
    :math:`\|L_m\|_2^2`.  ``ipar``/``fpar`` hold the options (``IP_*``,
    ``FP_*``); ``stats`` (``ST_*``) receives the counters.

    ``METHOD_BCD``: block coordinate descent on the loss
    (:func:`_coordinate_descent`) with step :math:`1/(L\|L_m\|_2^2)`, ``L`` =
    ``fpar[FP_LIP]``; when ``L`` is infinite (``IP_CHECK``) the curvature
    starts at the local :math:`\max_a (L_m^\top\mathrm{diag}(\ell'')L_m)_{aa}`
    and every step is checked on the loss (back-tracking).

    ``METHOD_NEWTON``: at most ``IP_MAX_NEWTON`` proximal Newton steps.  Each
    takes :math:`r_0 = \ell'(z_0)`, :math:`h = \ell''(z_0)`, stops when the
    violation of the working set is at most ``FP_TOL``, minimizes the model
    by coordinate descent to ``FP_RATIO`` times that violation (blocks of
    rank at most ``IP_EXACT_RANK`` exactly, with their Hessian
    :math:`L_m^\top\mathrm{diag}(h)L_m`: ``grams[goff[m]:]`` times ``h`` when
    ``h`` is constant, else :func:`_block_hessian` from ``LT`` or the
    sample-major copy ``tptr``/``tcol``/``tval`` of a sparse bank), and searches
    along the direction :math:`\Delta` with the Armijo rule
    :math:`P(x + t\Delta) \le P(x) + 10^{-4} t\,(r_0^\top\Delta z +
    R(\beta + \Delta\beta) - R(\beta))`, :math:`t = 1, \tfrac12, \dots`
    """
    method = ipar[IP_METHOD]
    sparse = ipar[IP_SPARSE] != 0
    with_bias = ipar[IP_BIAS] != 0
    kind = ipar[IP_KIND]
    n_and = ipar[IP_ANDERSON]
    C = fpar[FP_C]
    mu = fpar[FP_MU]
    lip_loss = fpar[FP_LIP]
    tol = fpar[FP_TOL]
    N = z.shape[0]
    nW = ws.shape[0]
    allidx = np.arange(N)
    for j in range(ST_LEN):
        stats[j] = 0.0
    lam = np.zeros(nW)
    rows, wseg = _ws_rows(ws, starts)
    f_start = _true_value(kind, y, z, lp, mu, lo, hi, beta, rows, wseg, C, rp, value, deriv,
                          deriv2, conj, conj_grad, conj_hess, reg_value)
    if method == METHOD_BCD:
        check = ipar[IP_CHECK] != 0
        v, r, h = loss_terms(kind, y, z, lp, mu, lo, hi, value, deriv, deriv2, conj, conj_grad,
                             conj_hess, False, check)
        for k in range(nW):
            m = ws[k]
            if check:
                c = _block_curv(sparse, LT, indptr, indices, data, starts[m], starts[m + 1], h)
                lam[k] = max(c, 1e-8 * lip[m])
            else:
                lam[k] = lip_loss * lip[m]
        viol, capped = _coordinate_descent(
            False, check, kind, sparse, with_bias, ipar[IP_MAX_EPOCHS], n_and, tol, ws, starts,
            lam, LT, indptr, indices, data, supp_ptr, supp_idx, allidx, y, lp, mu, lo, hi, C, rp,
            lip_loss, beta, z, bias, r, r, h, z, stats, np.empty(0),
            np.full(nW, -1, dtype=np.int64), 0, value, deriv, deriv2, conj, conj_grad, conj_hess,
            reg_value, reg_prox)
        stats[ST_VIOLATION] = viol
        if not np.isfinite(viol):
            stats[ST_STATUS] = NUMERICAL
        elif capped:
            stats[ST_STATUS] = CAPPED
    else:
        ratio = fpar[FP_RATIO]
        D = rows.shape[0] + 1
        old = np.empty(D)
        new = np.empty(D)
        z0 = np.empty(N)
        trial = np.empty(D)
        zt = np.empty(N)
        f0 = f_start
        stats[ST_STATUS] = CAPPED
        exact_rank = ipar[IP_EXACT_RANK]
        hoff = np.full(nW, -1, dtype=np.int64)
        size = 0
        for k in range(nW):
            rk = starts[ws[k] + 1] - starts[ws[k]]
            if 0 < rk <= exact_rank:
                hoff[k] = size
                size += rk * rk
        Hbuf = np.empty(size)
        for step in range(ipar[IP_MAX_NEWTON]):
            _, r0, h = loss_terms(kind, y, z, lp, mu, lo, hi, value, deriv, deriv2, conj,
                                  conj_grad, conj_hess, False, True)
            hmax = 0.0
            hmin = np.inf
            for i in range(N):
                if not (np.isfinite(r0[i]) and np.isfinite(h[i])):
                    stats[ST_STATUS] = NUMERICAL
                    return
                hmax = max(hmax, h[i])
                hmin = min(hmin, h[i])
            scale = hmax if hmax > 0.0 else (lip_loss if np.isfinite(lip_loss) else 1.0)
            use = hoff.copy()
            for k in range(nW):
                m = ws[k]
                s = starts[m]
                e = starts[m + 1]
                if hoff[k] >= 0:
                    rk = e - s
                    Hk = Hbuf[hoff[k]:hoff[k] + rk * rk].reshape((rk, rk))
                    if hmin == hmax and goff[m] >= 0:
                        Hk[:, :] = hmax * grams[goff[m]:goff[m] + rk * rk].reshape((rk, rk))
                    else:
                        _block_hessian(sparse, LT, s, e, m, h, supp_ptr, supp_idx, tptr, tcol,
                                       tval, Hk)
                    lam[k] = _top_eig(Hk)
                    if lam[k] > 0.0:
                        continue
                    use[k] = -1
                c = _block_curv(sparse, LT, indptr, indices, data, s, e, h)
                lam[k] = max(c, 1e-4 * scale * lip[m])
            viol0 = _ws_violation(sparse, ws, starts, lam, lip, fpar[FP_SCALE], LT, indptr,
                                  indices, data, r0, beta, C, rp, reg_prox, with_bias)
            stats[ST_VIOLATION] = viol0
            if not np.isfinite(viol0):
                stats[ST_STATUS] = NUMERICAL
                return
            if viol0 <= tol:
                stats[ST_STATUS] = OK
                break
            stats[ST_NEWTON] += 1.0
            _pack(beta, bias[0], rows, old)
            z0[:] = z
            r = r0.copy()
            viol, _ = _coordinate_descent(
                True, False, kind, sparse, with_bias, ipar[IP_MAX_EPOCHS], n_and,
                ratio * tol, ws, starts, lam, LT, indptr, indices, data,
                supp_ptr, supp_idx, allidx, y, lp, mu, lo, hi, C, rp, lip_loss, beta, z, bias, r,
                r0, h, z0, stats, Hbuf, use, ipar[IP_MAX_INNER], value, deriv, deriv2, conj,
                conj_grad, conj_hess, reg_value, reg_prox)
            if not np.isfinite(viol):
                stats[ST_STATUS] = NUMERICAL
                return
            _pack(beta, bias[0], rows, new)
            reg_old = _reg_sum_packed(old, wseg, C, rp, reg_value)
            reg_new = _reg_sum(beta, rows, wseg, C, rp, reg_value)
            slope = reg_new - reg_old
            for i in range(N):
                slope += r0[i] * (z[i] - z0[i])
            # near the optimum the slope (and the decrease) reach the rounding of the
            # objective, though the step still lowers the violation, which the dual point's
            # feasibility (the gap) depends on: a slope of that size counts as 0 and a step
            # that raises the objective by no more than its rounding is accepted
            slack = 1e-14 * abs(f0)
            if not (slope < 10.0 * slack):
                # no descent direction left: keep the start point
                bias[0] = _unpack(old, rows, beta)
                z[:] = z0
                stats[ST_STATUS] = NO_DESCENT
                break
            slope = min(slope, 0.0)
            t = 1.0
            accepted = False
            for ls in range(40):
                for j in range(D):
                    trial[j] = old[j] + t * (new[j] - old[j])
                bias[0] = _unpack(trial, rows, beta)
                for i in range(N):
                    zt[i] = z0[i] + t * (z[i] - z0[i])
                f1 = _true_value(kind, y, zt, lp, mu, lo, hi, beta, rows, wseg, C, rp, value,
                                 deriv, deriv2, conj, conj_grad, conj_hess, reg_value)
                if f1 <= f0 + 1e-4 * t * slope + slack:
                    accepted = True
                    break
                t *= 0.5
                stats[ST_LINE_SEARCH] += 1.0
            if not accepted:
                bias[0] = _unpack(old, rows, beta)
                z[:] = z0
                stats[ST_STATUS] = NO_DESCENT
                break
            z[:] = zt
            f0 = f1
    f_end = _true_value(kind, y, z, lp, mu, lo, hi, beta, rows, wseg, C, rp, value, deriv,
                        deriv2, conj, conj_grad, conj_hess, reg_value)
    stats[ST_DECREASE] = f_start - f_end


_i8 = types.int64


@njit(types.UniTuple(_F1, 3)(_i8, _F1, _F1, _F1, _f8, _F1, _F1, LOSS_FN, LOSS_FN, LOSS_FN,
                             LOSS_FN, LOSS_FN, LOSS_FN, _b1, _b1),
      cache=True)
def eval_loss(kind, y, z, lp, mu, lo, hi, value, deriv, deriv2, conj, conj_grad, conj_hess,
              want_value, want_curv):  # pragma: no cover - jitted
    """:func:`loss_terms`, compiled once for every loss (the engine's entry point)."""
    return loss_terms(kind, y, z, lp, mu, lo, hi, value, deriv, deriv2, conj, conj_grad,
                      conj_hess, want_value, want_curv)


@njit(_F1(_F1, _F1, _I1, _F1, _f8, _F1, REG_FN), cache=True)
def block_scores(beta, G, starts, nu, C, rp, reg_prox):  # pragma: no cover - jitted
    """:func:`scores`, compiled once for every regularizer (the engine's entry point)."""
    return scores(beta, G, starts, nu, C, rp, reg_prox)
