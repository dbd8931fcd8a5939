r"""Block operations of the bcd engine on transposed factors (jitted): block ``m`` is the rows
``s:e`` of ``bank.LT`` or of its CSR arrays (a :class:`~mklkit._jit.records.Bank`); ``reg``
is a :class:`~mklkit._jit.records.RegFns`."""

import numpy as np
from numba import njit

from .blocks import FM


@njit(cache=True, fastmath=FM)
def block_grad(bank, s, e, r, g):  # pragma: no cover - jitted
    r""":math:`g = L_m^\top r` for the rows ``s:e``."""
    LT, indptr, indices, data = bank.LT, bank.indptr, bank.indices, bank.data
    if bank.sparse:
        for a in range(s, e):
            acc = 0.0
            for k in range(indptr[a], indptr[a + 1]):
                acc += data[k] * r[indices[k]]
            g[a - s] = acc
    else:
        for a in range(s, e):
            g[a - s] = np.dot(LT[a], r)


@njit(cache=True, fastmath=FM)
def block_curv(bank, s, e, h):  # pragma: no cover - jitted
    r""":math:`\max_a \sum_i h_i L_{ia}^2`, the largest diagonal entry of
    :math:`L_m^\top\mathrm{diag}(h)L_m` (a lower bound of its largest eigenvalue)."""
    sparse, LT, indptr, indices, data = bank.sparse, bank.LT, bank.indptr, bank.indices, bank.data
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
def block_image(bank, s, e, d, w):  # pragma: no cover - jitted
    r""":math:`w \mathrel{+}= L_m d` (``w`` is zero on the block's support before)."""
    sparse, LT, indptr, indices, data = bank.sparse, bank.LT, bank.indptr, bank.indices, bank.data
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
def prox_scale(nv, Ct, reg, one):  # pragma: no cover - jitted
    r""":math:`\mathrm{prox}_{\tilde g_{C_t}}(\|v\|)/\|v\|` for a block of norm ``nv`` (0: zeroed)."""
    if not nv > 0.0:
        return 0.0
    one[0] = nv
    p = reg.prox(one, Ct, reg.params)[0]
    return p / nv if p > 0.0 else 0.0


@njit(cache=True)
def prox_step(beta, s, e, g, lam, C, reg, one, d):  # pragma: no cover - jitted
    r"""Block step :math:`d = \mathrm{prox}(\|v\| \mid \tilde g_{C/\lambda})\,v/\|v\| - \beta_m`,
    :math:`v = \beta_m - g/\lambda`, into ``d``; returns :math:`\|d\|^2`."""
    nv2 = 0.0
    for a in range(s, e):
        v = beta[a] - g[a - s] / lam
        nv2 += v * v
    sc = prox_scale(np.sqrt(nv2), C / lam, reg, one)
    dn2 = 0.0
    for a in range(s, e):
        da = sc * (beta[a] - g[a - s] / lam) - beta[a]
        d[a - s] = da
        dn2 += da * da
    return dn2


@njit(cache=True)
def scores(beta, G, starts, nu, C, reg):  # pragma: no cover - jitted
    r"""Every block's violation :math:`\nu_m\|\beta_m - \mathrm{prox}_{\tilde g_C/\nu_m}(\beta_m -
    g_m/\nu_m)\|`, the fixed-point residual of a block step with the gradient ``G``."""
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
            out[m] = nu[m] * np.sqrt(prox_step(beta, s, e, G[s:e], nu[m], C, reg, one, d))
    return out


@njit(cache=True)
def ws_rows(ws, starts):  # pragma: no cover - jitted
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
def pack(beta, bias, rows, out):  # pragma: no cover - jitted
    """The rows of the working set, then the bias, into ``out``."""
    for p in range(rows.shape[0]):
        out[p] = beta[rows[p]]
    out[rows.shape[0]] = bias


@njit(cache=True)
def unpack(src, rows, beta):  # pragma: no cover - jitted
    """Inverse of :func:`pack`; returns the bias."""
    for p in range(rows.shape[0]):
        beta[rows[p]] = src[p]
    return src[rows.shape[0]]


@njit(cache=True)
def reg_sum_packed(packed, wseg, C, reg):  # pragma: no cover - jitted
    r""":math:`\sum_{m\in W}\tilde g_C(\|\beta_m\|)` of the rows packed by :func:`pack`."""
    nW = wseg.shape[0] - 1
    if nW == 0:
        return 0.0
    nrm = np.empty(nW)
    for k in range(nW):
        acc = 0.0
        for p in range(wseg[k], wseg[k + 1]):
            acc += packed[p] * packed[p]
        nrm[k] = np.sqrt(acc)
    return np.sum(reg.value(nrm, C, reg.params))


@njit(cache=True)
def reg_sum(beta, rows, wseg, C, reg):  # pragma: no cover - jitted
    r""":math:`\sum_{m \in W}\tilde g_C(\|\beta_m\|)`."""
    packed = np.empty(rows.shape[0] + 1)
    pack(beta, 0.0, rows, packed)
    return reg_sum_packed(packed, wseg, C, reg)


@njit(cache=True)
def _cholesky_solve_ones(A):  # pragma: no cover - jitted
    r""":math:`A^{-1}\mathbf 1` for a small SPD ``A`` (overwritten by its Cholesky factor); NaN
    on a non-positive pivot.  (numba's ``np.linalg.solve`` costs seconds of compilation.)"""
    K = A.shape[0]
    for j in range(K):
        d = A[j, j]
        for k in range(j):
            d -= A[j, k] * A[j, k]
        if not d > 0.0:
            return np.full(K, np.nan)
        d = np.sqrt(d)
        A[j, j] = d
        for i in range(j + 1, K):
            v = A[i, j]
            for k in range(j):
                v -= A[i, k] * A[j, k]
            A[i, j] = v / d
    c = np.ones(K)
    for i in range(K):  # L w = 1
        v = c[i]
        for k in range(i):
            v -= A[i, k] * c[k]
        c[i] = v / A[i, i]
    for i in range(K - 1, -1, -1):  # L^T c = w
        v = c[i]
        for k in range(i + 1, K):
            v -= A[k, i] * c[k]
        c[i] = v / A[i, i]
    return c


@njit(cache=True)
def anderson(X):  # pragma: no cover - jitted
    r"""Anderson extrapolation weights :math:`c = (UU^\top)^{-1}\mathbf 1 / \mathbf
    1^\top(UU^\top)^{-1}\mathbf 1` from the iterates ``X`` (K + 1, D), :math:`U` their
    differences (Bertrand & Massias 2021, eq. 6), with a tiny ridge; empty when singular."""
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
    c = _cholesky_solve_ones(A)
    s = np.sum(c)
    if not (np.isfinite(s) and s != 0.0):
        return np.empty(0)
    return c / s


@njit(cache=True)
def block_min(beta, s, e, g, H, L, C, reg, one, d, work, max_inner):  # pragma: no cover
    r"""Minimize :math:`g^\top d + \tfrac12 d^\top Hd + \tilde g_C(\|\beta_m + d\|)` over one
    block to a relative residual of :math:`10^{-3}`: FISTA with gradient restart, step
    :math:`1/L`, :math:`L \ge \lambda_{\max}(H)`.  Writes ``d``; returns :math:`\|d\|^2`."""
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
        sc = prox_scale(np.sqrt(nv2), C / L, reg, one)
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
        if ip > 0.0:  # gradient restart
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
def block_hessian(bank, m, h, out):  # pragma: no cover - jitted
    r""":math:`L_m^\top\mathrm{diag}(h)L_m` into ``out`` (sparse: from the sample-major copy
    ``tptr``/``tcol``/``tval``)."""
    s = bank.starts[m]
    e = bank.starts[m + 1]
    LT, supp_ptr, supp_idx = bank.LT, bank.supp_ptr, bank.supp_idx
    tptr, tcol, tval = bank.tptr, bank.tcol, bank.tval
    rk = e - s
    if bank.sparse:
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
        G = (LT[s:e] * h) @ LT[s:e].T
        for a in range(rk):
            for b in range(rk):
                out[a, b] = G[a, b]
    for a in range(rk):  # exact symmetry
        for b in range(a):
            v = 0.5 * (out[a, b] + out[b, a])
            out[a, b] = v
            out[b, a] = v


@njit(cache=True)
def top_eig(H):  # pragma: no cover - jitted
    r"""An upper estimate of :math:`\lambda_{\max}(H)` (PSD ``H``): the smaller of the Gershgorin
    bound and 1.02 times 30 power iterations, at least the largest diagonal entry."""
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
