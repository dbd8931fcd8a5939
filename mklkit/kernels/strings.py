r"""String kernels on integer-coded sequences: ``spectrum``, ``subsequences``, ``all_subsequences`` and the
positional ``weighted_degree`` and ``weighted_degree_shift``.

A sequence is one row of the data: non-negative integer symbol codes, then (for a shorter sequence)
negative padding up to the width of the matrix, so sequences travel through feature groups, folds,
banks and the YAML ``data`` section like any other features.  :func:`encode_sequences` codes strings.
The kernels read the codes as given (``raw_input``): the data must not be standardised.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from .._jit.strings import subsequence_diag, subsequence_gram, weighted_degree_diag, weighted_degree_gram
from ..components.params import Param
from .errors import BankError
from .functions import KernelFunction

#: The padding code :func:`encode_sequences` writes after a shorter sequence.
PAD = -1
#: Symbols per position above which k-mers are counted through ``np.unique`` rather than one int64 code.
_CODE_BITS = 62


def encode_sequences(seqs: Iterable[Sequence[Any]], alphabet: Sequence[Any] | None = None) -> tuple[np.ndarray, list]:
    r"""Sequences (strings or lists of symbols) as one float64 matrix of symbol codes, padded with ``-1``.

    Parameters
    ----------
    seqs : iterable of str or sequences of hashable symbols
        The sequences, of any lengths (at least one symbol in all together).
    alphabet : sequence, optional
        The symbols in code order (symbol ``alphabet[c]`` gets code ``c``); default: the sorted symbols seen.

    Returns
    -------
    codes : ndarray (n, L) float64
        Row ``i``: the codes of sequence ``i``, then ``-1`` up to ``L``, the longest length.
    alphabet : list
        The symbols in code order: give it again to code new sequences the same way.

    Raises
    ------
    ValueError
        A symbol not in the given ``alphabet`` (named with the sequence and position), or no symbols at all.
    """
    rows = [list(s) for s in seqs]
    if alphabet is None:
        alphabet = sorted({c for r in rows for c in r})
    alphabet = list(alphabet)
    index = {c: k for k, c in enumerate(alphabet)}
    if len(index) != len(alphabet):
        raise ValueError("alphabet must not repeat a symbol")
    width = max((len(r) for r in rows), default=0)
    if width == 0:
        raise ValueError("encode_sequences needs at least one sequence with at least one symbol")
    out = np.full((len(rows), width), float(PAD))
    for i, r in enumerate(rows):
        for t, c in enumerate(r):
            try:
                out[i, t] = index[c]
            except KeyError:
                raise ValueError(
                    f"sequence {i}, position {t}: symbol {c!r} is not in the alphabet; allowed: {alphabet}"
                ) from None
    return out, alphabet


def sequence_codes(X: Any, name: str, kernel: str) -> tuple[np.ndarray, np.ndarray]:
    """The int64 codes of the rows of ``X`` and their lengths (codes before the padding), checked.

    A code must be a non-negative integer; padding (any negative integer) only after the last code of a row.
    Raises :class:`BankError` naming the row, column, value and what is allowed.
    """
    A = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise BankError(f"{name} must be a 2-d array of sequences (one per row); got shape {A.shape}")
    bad = ~np.isfinite(A) | (A != np.floor(A))
    if bad.any():
        r, j = (int(v) for v in np.argwhere(bad)[0])
        allowed = "integer symbol codes >= 0, negative integers as padding after the sequence"
        raise BankError(
            f"{name}[{r}, {j}] is {float(A[r, j])!r}: kernel {kernel!r} reads symbol codes; allowed: {allowed}",
            key=f"{name}[{r}, {j}]",
            problem=f"kernel {kernel!r} reads integer symbol codes",
            value=float(A[r, j]),
            allowed=allowed,
        )
    pad = A < 0
    lengths = np.where(pad.any(axis=1), pad.argmax(axis=1), A.shape[1]).astype(np.int64)
    after = np.arange(A.shape[1])[None, :] >= lengths[:, None]
    inside = after & ~pad
    if inside.any():
        r, j = (int(v) for v in np.argwhere(inside)[0])
        raise BankError(
            f"{name}[{r}, {j}] is the code {float(A[r, j])!r} after padding at column {int(lengths[r])}: "
            f"kernel {kernel!r} reads a sequence up to its first negative code; allowed: padding only at the end",
            key=f"{name}[{r}, {j}]",
            problem="a symbol code after the padding",
            value=float(A[r, j]),
            allowed="padding only at the end of a row",
        )
    return np.ascontiguousarray(A.astype(np.int64)), lengths


def _kmer_keys(codes: np.ndarray, lengths: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every k-mer of every sequence as ``(row, window)``: the row index and the (count, k) window codes."""
    n, L = codes.shape
    if L < k:
        return np.empty(0, dtype=np.int64), np.empty((0, k), dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(codes, k, axis=1)  # (n, L-k+1, k)
    valid = np.arange(L - k + 1)[None, :] <= (lengths - k)[:, None]
    rows = np.broadcast_to(np.arange(n)[:, None], valid.shape)[valid]
    return rows.astype(np.int64), np.ascontiguousarray(windows[valid])


def _window_ids(windows: np.ndarray, base: int) -> np.ndarray:
    """One int64 key per window: its codes in base ``base`` when that fits 62 bits, else a ``np.unique`` index."""
    k = windows.shape[1]
    if windows.shape[0] == 0:
        return np.empty(0, dtype=np.int64)
    if k * np.log2(max(base, 2)) <= _CODE_BITS:
        keys = np.zeros(windows.shape[0], dtype=np.int64)
        for t in range(k):
            keys = keys * base + windows[:, t]
        return keys
    return np.unique(windows, axis=0, return_inverse=True)[1].ravel().astype(np.int64)


def _counts(rows: np.ndarray, ids: np.ndarray, n: int, dim: int, binary: bool) -> sp.csr_matrix:
    """The (n, dim) matrix of k-mer counts (or indicators when ``binary``)."""
    C = sp.csr_matrix((np.ones(rows.size), (rows, ids)), shape=(n, dim))
    C.sum_duplicates()
    if binary:
        C.data[:] = 1.0
    return C


class SpectrumMap:
    r"""The exact feature map of the spectrum kernel on a vocabulary: :math:`\phi_u(x)` = occurrences of the
    k-mer :math:`u` in :math:`x` for the k-mers ``u`` seen in the training sequences (a k-mer never seen
    there has zero inner product with every training point, so it is left out).

    ``dim``: the number of k-mers kept; :meth:`rows` the (dim, n) CSR rows of points.
    """

    def __init__(self, func: "Spectrum", X: np.ndarray) -> None:
        codes, lengths = sequence_codes(X, "X", func.name)
        self.func = func
        self.base = int(codes.max(initial=0)) + 1
        self._wide = func.k * np.log2(max(self.base, 2)) > _CODE_BITS
        rows, windows = _kmer_keys(codes, lengths, func.k)
        if self._wide:
            self.vocab_windows = np.unique(windows, axis=0)
            self.vocab = np.arange(self.vocab_windows.shape[0], dtype=np.int64)
        else:
            self.vocab = np.unique(_window_ids(windows, self.base))
        self.dim = int(self.vocab.size)

    def rows(self, A: Any) -> sp.csr_matrix:
        """The (dim, n) rows of :math:`\\phi(a)^\\top` of the points ``A``."""
        codes, lengths = sequence_codes(A, "X_new", self.func.name)
        rows, windows = _kmer_keys(codes, lengths, self.func.k)
        keep = np.all(windows < self.base, axis=1) if windows.size else np.zeros(0, dtype=bool)
        rows, windows = rows[keep], windows[keep]
        if self._wide:
            allw = np.concatenate([self.vocab_windows, windows])
            _, inv = np.unique(allw, axis=0, return_inverse=True)
            inv = inv.ravel()
            voc, ids = inv[: self.dim], inv[self.dim :]
            pos = np.full(int(inv.max(initial=-1)) + 1, -1, dtype=np.int64)
            pos[voc] = np.arange(self.dim)
            col = pos[ids]
        else:
            keys = _window_ids(windows, self.base)
            col = np.searchsorted(self.vocab, keys)
            col[col >= self.dim] = 0
            col = np.where(self.vocab[col] == keys, col, -1) if self.dim else np.full(keys.size, -1)
        seen = col >= 0
        C = _counts(rows[seen], col[seen], codes.shape[0], self.dim, bool(self.func.binary))
        return sp.csr_matrix(C.T)


class Spectrum(KernelFunction):
    r"""Spectrum kernel (Leslie, Eskin & Noble 2002): :math:`k(x, z) = \sum_{u \in \Sigma^k}
    \phi_u(x)\phi_u(z)`, :math:`\phi_u(x)` the number of occurrences of the k-mer (contiguous substring of
    length ``k``) :math:`u` in :math:`x` (``binary``: 1 when it occurs, else 0).

    Input: rows of integer symbol codes (:func:`encode_sequences`), padded with negative codes.  Gram
    matrices are products of sparse k-mer count matrices; the exact feature map (:class:`SpectrumMap`)
    gives factor banks exact factors when it is small.
    """

    name: ClassVar[str] = "spectrum"
    description: ClassVar[str] = "spectrum kernel: common k-mers (contiguous substrings of length k) of sequences"
    params: ClassVar[tuple[Param, ...]] = (
        Param("k", 3, "k-mer length", type=int, low=1),
        Param("binary", False, "count each k-mer once per sequence (presence, not occurrences)", type=bool),
    )
    raw_input: ClassVar[bool] = True

    def _maps(self, X: Any, Z: Any) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
        cx, lx = sequence_codes(X, "X", self.name)
        rx, wx = _kmer_keys(cx, lx, self.k)
        if Z is None:
            ids, n = _window_ids(wx, int(cx.max(initial=0)) + 1), cx.shape[0]
            _, ids = np.unique(ids, return_inverse=True)
            return _counts(rx, ids.ravel(), n, int(ids.max(initial=-1)) + 1, self.binary), None
        cz, lz = sequence_codes(Z, "Z", self.name)
        if cz.shape[1] != cx.shape[1]:
            raise ValueError(f"X has {cx.shape[1]} columns but Z has {cz.shape[1]}")
        rz, wz = _kmer_keys(cz, lz, self.k)
        base = int(max(cx.max(initial=0), cz.max(initial=0))) + 1
        ids = _window_ids(np.concatenate([wx, wz]), base)
        _, ids = np.unique(ids, return_inverse=True)
        ids = ids.ravel()
        dim = int(ids.max(initial=-1)) + 1
        return (
            _counts(rx, ids[: rx.size], cx.shape[0], dim, self.binary),
            _counts(rz, ids[rx.size :], cz.shape[0], dim, self.binary),
        )

    def gram(self, X: Any, Z: Any = None) -> np.ndarray:
        if Z is X:
            Z = None
        Cx, Cz = self._maps(X, Z)
        G = (Cx @ (Cx if Cz is None else Cz).T).toarray()
        return np.ascontiguousarray(G, dtype=np.float64)

    def diag(self, X: Any) -> np.ndarray:
        Cx, _ = self._maps(X, None)
        return np.asarray(Cx.multiply(Cx).sum(axis=1), dtype=np.float64).ravel()

    def explicit_map(self, X: Any) -> SpectrumMap:
        """The k-mer count map on the k-mers of the training sequences ``X`` (:class:`SpectrumMap`)."""
        return SpectrumMap(self, X)


class _Subsequences(KernelFunction):
    """Shared Gram and diagonal of the subsequence kernels (jitted dynamic programme)."""

    raw_input: ClassVar[bool] = True
    _length: ClassVar[str] = ""

    def _p(self) -> int:
        return int(getattr(self, self._length)) if self._length else 0

    def gram(self, X: Any, Z: Any = None) -> np.ndarray:
        if Z is X:
            Z = None
        cx, lx = sequence_codes(X, "X", self.name)
        if Z is None:
            G = subsequence_gram(cx, lx, cx, lx, self._p(), True)
        else:
            cz, lz = sequence_codes(Z, "Z", self.name)
            if cz.shape[1] != cx.shape[1]:
                raise ValueError(f"X has {cx.shape[1]} columns but Z has {cz.shape[1]}")
            G = subsequence_gram(cx, lx, cz, lz, self._p(), False)
        return self._finite(G)

    def diag(self, X: Any) -> np.ndarray:
        cx, lx = sequence_codes(X, "X", self.name)
        return self._finite(subsequence_diag(cx, lx, self._p()))

    def _finite(self, G: np.ndarray) -> np.ndarray:
        if not np.all(np.isfinite(G)):
            raise BankError(
                f"kernel {self.label()!r}: the number of common subsequences overflows float64 "
                "(above 1.8e308: sequences of about 500 symbols and more for all_subsequences); "
                "use shorter sequences or subsequences of a fixed length p",
                problem="overflows float64",
                allowed="shorter sequences, or subsequences of a fixed length",
            )
        return G


class Subsequences(_Subsequences):
    r"""Fixed-length subsequence kernel (Shawe-Taylor & Cristianini 2004, §11.3):
    :math:`k(x, z) = \sum_{u \in \Sigma^p} \phi_u(x)\phi_u(z)`, :math:`\phi_u(x)` the number of index tuples
    :math:`i_1 < \dots < i_p` with :math:`x_{i_1}\cdots x_{i_p} = u` (gaps allowed, not penalised).

    Computed by the dynamic programme :math:`S_l[a, b] = S_l[a-1, b] + \sum_{b' \le b,\, z_{b'} = x_a}
    S_{l-1}[a-1, b'-1]`, :math:`S_0 \equiv 1`, :math:`k = S_p[|x|, |z|]`: :math:`O(p|x||z|)` per pair.
    """

    name: ClassVar[str] = "subsequences"
    description: ClassVar[str] = "fixed-length subsequence kernel: common subsequences (gaps allowed) of length p"
    params: ClassVar[tuple[Param, ...]] = (Param("p", 2, "subsequence length", type=int, low=1),)
    _length: ClassVar[str] = "p"


class AllSubsequences(_Subsequences):
    r"""All-subsequences kernel (Shawe-Taylor & Cristianini 2004, §11.3): :math:`k(x, z) = \sum_{u \in
    \Sigma^*} \phi_u(x)\phi_u(z)` over subsequences of every length, the empty one included (so
    :math:`k \ge 1`), by the same dynamic programme in one table: :math:`O(|x||z|)` per pair.

    Values grow like :math:`\binom{2L}{L}` for equal sequences of length :math:`L`: finite in float64
    up to :math:`L \approx 500`; an overflow is an error.
    """

    name: ClassVar[str] = "all_subsequences"
    description: ClassVar[str] = "all-subsequences kernel: common subsequences of every length"
    params: ClassVar[tuple[Param, ...]] = ()


class _WeightedDegree(KernelFunction):
    """Shared Gram matrix and diagonal of the weighted degree kernels (jitted sums over runs of matches)."""

    raw_input: ClassVar[bool] = True

    def betas(self) -> np.ndarray:
        r"""The weights :math:`\beta_k = 2(d - k + 1)/(d(d + 1))` of the k-mer lengths :math:`k = 1..d`
        (they sum to 1)."""
        d = int(self.degree)
        k = np.arange(1, d + 1, dtype=np.float64)
        return 2.0 * (d - k + 1.0) / (d * (d + 1.0))

    def shift_weights(self) -> np.ndarray:
        """The weight of each shift ``s = 0, 1, ...`` (a shift ``s >= 1`` counted once with each sequence ahead)."""
        return np.ones(1)

    def run_weights(self, width: int) -> np.ndarray:
        r"""``w[r]``, ``r = 0..width``: what a maximal run of ``r`` matching positions contributes,
        :math:`w_r = \sum_{k=1}^{\min(r, d)} \beta_k (r - k + 1)` (its k-mers of every length)."""
        r = np.arange(width + 1, dtype=np.float64)
        k = np.arange(1, int(self.degree) + 1, dtype=np.float64)
        return np.ascontiguousarray(np.maximum(r[:, None] - k[None, :] + 1.0, 0.0) @ self.betas())

    def gram(self, X: Any, Z: Any = None) -> np.ndarray:
        if Z is X:
            Z = None
        cx, lx = sequence_codes(X, "X", self.name)
        w, delta = self.run_weights(cx.shape[1]), self.shift_weights()
        if Z is None:
            return weighted_degree_gram(cx, lx, cx, lx, w, delta, True)
        cz, lz = sequence_codes(Z, "Z", self.name)
        if cz.shape[1] != cx.shape[1]:
            raise ValueError(f"X has {cx.shape[1]} columns but Z has {cz.shape[1]}")
        return weighted_degree_gram(cx, lx, cz, lz, w, delta, False)

    def diag(self, X: Any) -> np.ndarray:
        cx, lx = sequence_codes(X, "X", self.name)
        return weighted_degree_diag(cx, lx, self.run_weights(cx.shape[1]), self.shift_weights())


class WeightedDegree(_WeightedDegree):
    r"""Weighted degree kernel (Rätsch & Sonnenburg 2004; Sonnenburg, Rätsch & Schölkopf 2005): the k-mers
    two sequences share at the same position, for every length up to ``degree`` :math:`d`,

    .. math:: k(x, z) = \sum_{k=1}^{d} \beta_k \sum_{l} \mathbf 1[x_{l..l+k-1} = z_{l..l+k-1}],
              \qquad \beta_k = \frac{2(d - k + 1)}{d(d + 1)},

    over the positions :math:`l` where both sequences have :math:`k` symbols (padding never matches).
    A maximal run of :math:`r` matching positions holds :math:`r - k + 1` matching k-mers, so the kernel is
    a sum of :math:`w_r = \sum_{k \le \min(r, d)} \beta_k (r - k + 1)` over the runs: :math:`O(L)` per pair.

    Its feature map (:class:`WeightedDegreeMap`) is the positional k-mer indicator
    :math:`\phi_{k,l,u}(x) = \sqrt{\beta_k}\,\mathbf 1[x_{l..l+k-1} = u]`.
    """

    name: ClassVar[str] = "weighted_degree"
    description: ClassVar[str] = "weighted degree kernel: k-mers (k = 1..degree) shared at the same position"
    params: ClassVar[tuple[Param, ...]] = (
        Param("degree", 10, "largest k-mer length d (weights 2(d-k+1)/(d(d+1)))", type=int, low=1),
    )

    def explicit_map(self, X: Any) -> "WeightedDegreeMap | None":
        """The positional k-mer map on the (length, position, k-mer) triples of the training sequences
        ``X`` (:class:`WeightedDegreeMap`); ``None`` when its keys do not fit 62 bits."""
        codes, _ = sequence_codes(X, "X", self.name)
        base = int(codes.max(initial=0)) + 1
        width = max(codes.shape[1], 1)
        if width * base ** min(int(self.degree), width) >= 2**_CODE_BITS:
            return None
        return WeightedDegreeMap(self, X)


class WeightedDegreeShift(_WeightedDegree):
    r"""Weighted degree kernel with shifts (Rätsch, Sonnenburg & Schölkopf 2005): k-mers also match when one
    of them is up to ``shift`` :math:`S` positions further along,

    .. math:: k(x, z) = \sum_{k=1}^{d} \beta_k \sum_{l} \sum_{s=0}^{S} \delta_s
              \bigl(\mathbf 1[x_{l+s..l+s+k-1} = z_{l..l+k-1}] + \mathbf 1[x_{l..l+k-1} = z_{l+s..l+s+k-1}]\bigr),
              \qquad \delta_s = \frac{1}{2(s + 1)},

    over the windows inside both sequences; ``shift = 0`` is :class:`WeightedDegree`.  Each shift is a
    diagonal of runs of matches: :math:`O(L\,S)` per pair.  It is positive semidefinite: it is
    :math:`\sum_{l, l'} T_{ll'} \langle\phi_l(x), \phi_{l'}(z)\rangle` (:math:`\phi_l` the positional k-mer
    indicators at :math:`l`) with :math:`T` the banded Toeplitz matrix :math:`T_{ll} = 1`,
    :math:`T_{l,l\pm s} = \delta_s`, whose symbol :math:`1 + \sum_{s=1}^{S} \cos(s\omega)/(s + 1)` stays
    at least 1/2.
    """

    name: ClassVar[str] = "weighted_degree_shift"
    description: ClassVar[str] = "weighted degree kernel with shifts: k-mers shared up to `shift` positions apart"
    params: ClassVar[tuple[Param, ...]] = (
        Param("degree", 10, "largest k-mer length d (weights 2(d-k+1)/(d(d+1)))", type=int, low=1),
        Param("shift", 2, "largest shift S (weights 1/(2(s+1)))", type=int, low=0),
    )

    def shift_weights(self) -> np.ndarray:
        """``[1, δ_1, ..., δ_S]``: shift 0 counted once, each shift ``s >= 1`` with weight ``1/(2(s + 1))``."""
        s = np.arange(int(self.shift) + 1, dtype=np.float64)
        out = 1.0 / (2.0 * (s + 1.0))
        out[0] = 1.0
        return out


class WeightedDegreeMap:
    r"""The exact feature map of the weighted degree kernel: :math:`\phi_{k,l,u}(x) = \sqrt{\beta_k}\,
    \mathbf 1[x_{l..l+k-1} = u]` for the (length :math:`k \le d`, position :math:`l`, k-mer :math:`u`)
    triples seen in the training sequences (another triple has zero inner product with every training
    point, so it is left out).

    ``dim``: the number of triples kept; :meth:`rows` the (dim, n) CSR rows of points.
    """

    def __init__(self, func: WeightedDegree, X: Any) -> None:
        codes, lengths = sequence_codes(X, "X", func.name)
        self.func = func
        self.base = int(codes.max(initial=0)) + 1
        self.width = codes.shape[1]
        self.scale = np.sqrt(func.betas())
        self.vocab = [np.unique(keys[valid]) for _, keys, valid in self._keys(codes, lengths)]
        self.offsets = np.concatenate([[0], np.cumsum([v.size for v in self.vocab])]).astype(np.int64)
        self.dim = int(self.offsets[-1])

    def _keys(self, codes: np.ndarray, lengths: np.ndarray) -> Iterable[tuple[int, np.ndarray, np.ndarray]]:
        """Per k-mer length ``k``: the (n, width - k + 1) keys ``l * base**k + code`` of the k-mers and where
        they exist (inside the sequence, every symbol one of the training codes)."""
        n = codes.shape[0]
        L = min(codes.shape[1], self.width)
        codes = codes[:, :L]
        known = (codes >= 0) & (codes < self.base)
        digits = np.where(known, codes, 0)
        ids = np.zeros((n, L), dtype=np.int64)
        ok = np.ones((n, L), dtype=bool)
        for k in range(1, min(int(self.func.degree), L) + 1):
            m = L - k + 1
            ids = ids[:, :m] * self.base + digits[:, k - 1 : k - 1 + m]
            ok = ok[:, :m] & known[:, k - 1 : k - 1 + m]
            pos = np.arange(m, dtype=np.int64)
            valid = ok & (pos[None, :] <= (lengths - k)[:, None])
            yield k, pos[None, :] * self.base**k + ids, valid

    def rows(self, A: Any) -> sp.csr_matrix:
        """The (dim, n) rows of :math:`\\phi(a)^\\top` of the points ``A``."""
        codes, lengths = sequence_codes(A, "X_new", self.func.name)
        cols, pts, vals = [], [], []
        for k, keys, valid in self._keys(codes, lengths):
            vocab = self.vocab[k - 1]
            pt, _ = np.nonzero(valid)
            key = keys[valid]
            at = np.minimum(np.searchsorted(vocab, key), max(vocab.size - 1, 0))
            hit = vocab[at] == key if vocab.size else np.zeros(key.size, dtype=bool)
            cols.append(self.offsets[k - 1] + at[hit])
            pts.append(pt[hit])
            vals.append(np.full(int(hit.sum()), self.scale[k - 1]))
        if not cols:
            return sp.csr_matrix((self.dim, codes.shape[0]))
        B = sp.coo_matrix(
            (np.concatenate(vals), (np.concatenate(cols), np.concatenate(pts))), shape=(self.dim, codes.shape[0])
        )
        return B.tocsr()


#: The string kernels, registered by ``mklkit.builtin``.
STRING_KERNEL_FUNCTIONS: tuple[type[KernelFunction], ...] = (
    Spectrum,
    Subsequences,
    AllSubsequences,
    WeightedDegree,
    WeightedDegreeShift,
)
