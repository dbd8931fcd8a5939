r"""Jitted string kernels on integer-coded sequences: the subsequence dynamic programmes, the weighted degree runs.

A sequence is row ``i`` of an int64 matrix with its length ``n[i]`` (the codes after it are padding).
The subsequence kernels count pairs of equal subsequences (index tuples :math:`i_1 < \dots < i_l` of ``x`` and
:math:`j_1 < \dots < j_l` of ``z`` with :math:`x_{i_t} = z_{j_t}`), by the recursion
:math:`S_l[a, b] = S_l[a-1, b] + \sum_{b' \le b,\ z_{b'} = x_a} S_{l-1}[a-1, b'-1]`, whose inner sum is
a running sum: no subtraction, so no cancellation.  The weighted degree kernels sum, over the maximal
runs of matching positions of two sequences (shifted against each other for the shift variant), a
weight of the run length: :math:`O(L)` per pair and shift.
"""

import numpy as np
from numba import njit


@njit(cache=True)
def _fixed_pair(x, nx, z, nz, p, prev, cur):  # pragma: no cover - jitted
    """Pairs of equal subsequences of length ``p`` of ``x[:nx]`` and ``z[:nz]`` (``prev``, ``cur``: work space
    of at least (nx + 1, nz + 1))."""
    for a in range(nx + 1):
        for b in range(nz + 1):
            prev[a, b] = 1.0
    for _ in range(p):
        for b in range(nz + 1):
            cur[0, b] = 0.0
        for a in range(1, nx + 1):
            xa = x[a - 1]
            run = 0.0
            cur[a, 0] = 0.0
            for b in range(1, nz + 1):
                if z[b - 1] == xa:
                    run += prev[a - 1, b - 1]
                cur[a, b] = cur[a - 1, b] + run
        for a in range(nx + 1):
            for b in range(nz + 1):
                prev[a, b] = cur[a, b]
    return prev[nx, nz]


@njit(cache=True)
def _all_pair(x, nx, z, nz, work):  # pragma: no cover - jitted
    """Pairs of equal subsequences of every length (the empty one included) of ``x[:nx]`` and ``z[:nz]``."""
    for b in range(nz + 1):
        work[0, b] = 1.0
    for a in range(1, nx + 1):
        xa = x[a - 1]
        run = 0.0
        work[a, 0] = 1.0
        for b in range(1, nz + 1):
            if z[b - 1] == xa:
                run += work[a - 1, b - 1]
            work[a, b] = work[a - 1, b] + run
    return work[nx, nz]


@njit(cache=True)
def subsequence_gram(X, nX, Z, nZ, p, symmetric):  # pragma: no cover - jitted
    """``K[i, j]``: the subsequence kernel of ``X[i, :nX[i]]`` and ``Z[j, :nZ[j]]``; ``p >= 1``: of length ``p``,
    ``p == 0``: of every length (the all-subsequences kernel); ``symmetric``: ``Z`` is ``X``, the upper
    triangle computed and mirrored."""
    n, m = X.shape[0], Z.shape[0]
    K = np.empty((n, m))
    w1 = np.empty((X.shape[1] + 1, Z.shape[1] + 1))
    w2 = np.empty((X.shape[1] + 1, Z.shape[1] + 1))
    for i in range(n):
        start = i if symmetric else 0
        for j in range(start, m):
            if p == 0:
                v = _all_pair(X[i], nX[i], Z[j], nZ[j], w1)
            else:
                v = _fixed_pair(X[i], nX[i], Z[j], nZ[j], p, w1, w2)
            K[i, j] = v
            if symmetric:
                K[j, i] = v
    return K


@njit(cache=True)
def subsequence_diag(X, nX, p):  # pragma: no cover - jitted
    """``k(x_i, x_i)`` of :func:`subsequence_gram` for every row."""
    n = X.shape[0]
    out = np.empty(n)
    w1 = np.empty((X.shape[1] + 1, X.shape[1] + 1))
    w2 = np.empty((X.shape[1] + 1, X.shape[1] + 1))
    for i in range(n):
        if p == 0:
            out[i] = _all_pair(X[i], nX[i], X[i], nX[i], w1)
        else:
            out[i] = _fixed_pair(X[i], nX[i], X[i], nX[i], p, w1, w2)
    return out


@njit(cache=True)
def _diagonal_runs(x, nx, z, nz, off, w):  # pragma: no cover - jitted
    """:math:`\\sum` of ``w[r]`` over the maximal runs of ``r`` positions ``l`` with ``x[l + off] == z[l]``
    (``0 <= l < min(nx - off, nz)``): the matches of one diagonal of the (x, z) comparison."""
    m = min(nx - off, nz)
    total = 0.0
    run = 0
    for t in range(m):
        if x[t + off] == z[t]:
            run += 1
        elif run > 0:
            total += w[run]
            run = 0
    if run > 0:
        total += w[run]
    return total


@njit(cache=True)
def _wd_pair(x, nx, z, nz, w, delta):  # pragma: no cover - jitted
    """Weighted degree kernel with shifts ``0 .. len(delta) - 1`` of ``x[:nx]`` and ``z[:nz]``."""
    v = delta[0] * _diagonal_runs(x, nx, z, nz, 0, w)
    for s in range(1, delta.shape[0]):
        if s < nx:
            v += delta[s] * _diagonal_runs(x, nx, z, nz, s, w)
        if s < nz:
            v += delta[s] * _diagonal_runs(z, nz, x, nx, s, w)
    return v


@njit(cache=True)
def weighted_degree_gram(X, nX, Z, nZ, w, delta, symmetric):  # pragma: no cover - jitted
    r"""``K[i, j]``: the weighted degree kernel of ``X[i, :nX[i]]`` and ``Z[j, :nZ[j]]``.

    ``w[r]`` (``r = 0 .. width``): what a run of ``r`` matching positions contributes,
    :math:`\sum_{k \le \min(r, d)} \beta_k (r - k + 1)`; ``delta[s]``: the weight of the shift ``s``
    (``delta = [1]``: no shifts), each shift ``s >= 1`` counted with ``x`` and with ``z`` ahead;
    ``symmetric``: ``Z`` is ``X``, the upper triangle computed and mirrored.  :math:`O(L)` per pair and shift.
    """
    n, m = X.shape[0], Z.shape[0]
    K = np.empty((n, m))
    for i in range(n):
        start = i if symmetric else 0
        for j in range(start, m):
            v = _wd_pair(X[i], nX[i], Z[j], nZ[j], w, delta)
            K[i, j] = v
            if symmetric:
                K[j, i] = v
    return K


@njit(cache=True)
def weighted_degree_diag(X, nX, w, delta):  # pragma: no cover - jitted
    """``k(x_i, x_i)`` of :func:`weighted_degree_gram` for every row."""
    out = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        out[i] = _wd_pair(X[i], nX[i], X[i], nX[i], w, delta)
    return out
