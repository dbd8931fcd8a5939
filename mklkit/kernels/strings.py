r"""String kernels on integer-coded sequences: ``spectrum``, ``subsequences`` and ``all_subsequences``.

A sequence is one row of the data: non-negative integer symbol codes, then (for a shorter sequence)
negative padding up to the width of the matrix, so sequences travel through feature groups, folds,
banks and the YAML ``data`` section like any other features.  :func:`encode_sequences` codes strings.
The kernels read the codes as given (``raw_input``): the data must not be standardised.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from .._jit.strings import subsequence_diag, subsequence_gram
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


#: The string kernels, registered by ``mklkit.builtin``.
STRING_KERNEL_FUNCTIONS: tuple[type[KernelFunction], ...] = (Spectrum, Subsequences, AllSubsequences)
