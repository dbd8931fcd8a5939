"""Identical points of the SKM's dual, merged into one variable each (exact)."""

from __future__ import annotations

import numpy as np

__all__ = ["MergedPoints"]

#: Two points are merged when their squared distance in every kernel's feature space,
#: K_pp + K_qq - 2 K_pq, is at most this fraction of K_pp + K_qq (rounding level).
_IDENTICAL_RTOL = 1e-12
#: The SMO loop runs on the distinct points when they are at most this fraction of all.
_MERGE_FRACTION = 0.9


class MergedPoints:
    r"""The SKM's dual on the distinct points: identical points merged (exact).

    Points :math:`p, q` with the same label and :math:`\phi_j(x_p) = \phi_j(x_q)`
    for every kernel have equal rows in every :math:`K_j`, so (D_K) and its
    Moreau-Yosida regularization depend on :math:`\alpha_p, \alpha_q` only through
    :math:`\alpha_p + \alpha_q` (in :math:`e^\top\alpha`, :math:`y^\top\alpha` and
    :math:`K_jD(y)\alpha`).  A group of :math:`k` identical points is one variable
    in :math:`[0, kU]`; spreading its value over the members (:meth:`expand`) gives a
    point of the original dual with the same value, the same scores :math:`S_p` and
    the same pair conditions.  Binary or categorical features make such
    groups common (Adult: 6212 points, 1759 distinct).

    Attributes
    ----------
    rep : ndarray (G,)
        The first point of each group.
    of : ndarray (N,)
        The group of every point.
    count : ndarray (G,)
        Group sizes (float64).
    K : ndarray (M, G, G)
        The bank on the representatives.
    y : ndarray (G,)
    """

    def __init__(self, K: np.ndarray, y: np.ndarray, group: np.ndarray) -> None:
        rep, of, count = np.unique(group, return_inverse=True, return_counts=True)
        self.rep = rep.astype(np.int64)
        self.of = of.astype(np.int64)
        self.count = count.astype(np.float64)
        from ._skm import sub_bank

        self.K = sub_bank(K, self.rep)
        self.y = np.ascontiguousarray(y[self.rep], dtype=np.float64)

    @classmethod
    def find(
        cls, K: np.ndarray, y: np.ndarray, probes: int = 8, seed: int = 0, max_fraction: float = 1.0
    ) -> "MergedPoints | None":
        """Group the identical points of the bank ``K``.

        None when all points are distinct, or when more than ``max_fraction`` of them
        are (then the merged bank would cost nearly as much memory as the bank and
        save little).

        Candidates share a label and a signature -- a random combination of each
        kernel's diagonal and a few of its columns, equal for identical points --
        and are confirmed by their distances in every kernel (``_IDENTICAL_RTOL``).
        O(M N (probes + 1)) for the signatures plus O(M) per comparison; the comparisons
        grow with the square of the longest run of equal signatures among distinct
        points (one-hot data under a linear kernel puts most points in one run: 6000
        such points take 0.2 s).
        """
        from ._skm import identical_groups

        M, N = K.shape[0], K.shape[1]
        rng = np.random.default_rng(seed)
        cols = np.sort(rng.choice(N, min(probes, N), replace=False))
        w = rng.standard_normal((M, cols.size + 1))
        h = np.zeros(N)
        scale = 0.0
        for k in range(M):
            dk = np.diagonal(K[k])
            h += K[k][:, cols] @ w[k, :-1] + dk * w[k, -1]
            scale += float(np.sum(np.abs(w[k]))) * float(np.max(np.abs(dk), initial=0.0))
        yy = np.ascontiguousarray(y, dtype=np.float64)
        order = np.lexsort((h, yy)).astype(np.int64)
        group = np.empty(N, dtype=np.int64)
        identical_groups(
            K, yy, order, np.ascontiguousarray(h[order]), 1e-9 * max(scale, 1e-300), _IDENTICAL_RTOL, group
        )
        n_distinct = int(np.sum(group == np.arange(N)))
        if n_distinct == N or n_distinct > max_fraction * N:
            return None
        return cls(K, yy, group)

    def expand(self, beta: np.ndarray, U: float) -> np.ndarray:
        """Dual variables of the original points: each group's value filled into its points in turn.

        The members of a group get :math:`U` each until its value is used up, one of
        them the remainder and the rest 0 -- as few support vectors as possible.  All
        members have the same score, so the pair conditions do not change.
        """
        order = np.argsort(self.of, kind="stable")
        g = self.of[order]
        first = np.searchsorted(g, g)  # position of each group's first point in ``order``
        rank = np.arange(g.size) - first
        out = np.empty(g.size)
        out[order] = np.clip(beta[g] - rank * U, 0.0, U)
        return out
