r"""The proximal-gradient engine's objective and certificate (docs/engines.md, proximal): the
prox, value and conjugate of :math:`\tilde g_C(x) + \mu x^2`, the compact iterates
(:class:`Iterate`), the screening bounds of zero blocks (:class:`ScreeningBounds`), and the
passes over the bank: on an (M, N, N) array through the jitted loops (:class:`ArrayPasses`),
or on a :class:`~mklkit.kernels.factor.FactorBank` in :math:`O(NR)` with no N x N array
(:class:`FactorPasses`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numba
import numpy as np

from .._jit import blocks
from .._jit import proximal as kprox
from ..kernels.factor import FactorBank
from ..problem import Problem
from ..result import SolveResult
from . import common
from .base import Algorithm, Engine, Run

#: Reads of the bank smaller than this many multiply-adds (about a millisecond on one core)
#: run without threads: starting a parallel region costs more than the work.
PARALLEL_MIN_WORK = 1 << 21


def power_iteration(A: np.ndarray, n_iter: int = 50, rtol: float = 1e-6) -> float:
    r"""Largest eigenvalue of a symmetric PSD matrix, from below: power iteration from the
    all-ones vector slightly perturbed, until the Rayleigh quotient moves by less than
    ``rtol`` relatively."""
    n = A.shape[0]
    if n == 0:
        return 0.0
    x = np.ones(n) + 1e-3 * np.cos(np.arange(n) * 1.7)
    x /= np.linalg.norm(x)
    lam = 0.0
    for _ in range(max(1, int(n_iter))):
        y = A @ x
        new = float(x @ y)
        ny = float(np.linalg.norm(y))
        if not (ny > 0.0 and math.isfinite(ny)):
            return max(new, 0.0)
        x = y / ny
        if abs(new - lam) <= rtol * abs(new):
            lam = new
            break
        lam = new
    return max(lam, 0.0)


def lipschitz_estimate(S: Any, bias: bool, n_iter: int = 50) -> tuple[float, float]:
    r""":math:`\lambda_{\max}(S + \omega^{-1}\mathbf 1\mathbf 1^\top)` and the bias metric
    :math:`\omega` (1 without a bias, else :math:`N/\lambda_{\max}(S)`) for :math:`S =
    \sum_m K_m` (an array, or an operator with ``shape``, ``@`` and ``+ c``)."""
    n = S.shape[0]
    lam_s = power_iteration(S, n_iter)
    if not (lam_s > 0.0 and math.isfinite(lam_s)):
        lam_s = 1.0  # all kernels vanish: any positive scale will do
    if not bias:
        return lam_s, 1.0
    omega = n / lam_s
    A = S + (1.0 / omega)
    lam = power_iteration(A, n_iter)
    return max(lam, lam_s), omega


class SumOperator:
    r""":math:`\sum_m K_m + c\,\mathbf 1\mathbf 1^\top` of a factor bank as an operator."""

    def __init__(self, bank: FactorBank, c: float = 0.0) -> None:
        self.bank = bank
        self.c = c
        self.shape = (bank.n_samples, bank.n_samples)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        out = self.bank.sum_matvec(x)
        return out + self.c * float(np.sum(x)) if self.c else out

    def __add__(self, c: float) -> SumOperator:
        return SumOperator(self.bank, self.c + float(c))


class ArrayPasses:
    """The passes over an (M, N, N) array, threaded only for large reads."""

    def __init__(self, K: np.ndarray) -> None:
        self.K = K

    def _parallel(self, n_blocks: int) -> bool:
        return n_blocks * self.K.shape[1] ** 2 >= PARALLEL_MIN_WORK and numba.get_num_threads() > 1

    def summary(self, bias: bool, n_iter: int) -> tuple[float, float, np.ndarray]:
        r""":math:`\lambda_{\max}`, :math:`\omega` (:func:`lipschitz_estimate`) and :math:`\|K_m\|_F`."""
        S, frob = kprox.bank_summary(self.K)
        lam, omega = lipschitz_estimate(S, bias, n_iter)
        return lam, omega, frob

    def matvecs(self, v: np.ndarray, idx: np.ndarray) -> np.ndarray:
        if idx.size == 0:
            return np.zeros((0, self.K.shape[1]))
        fn = blocks.matvecs_rows if self._parallel(idx.size) else blocks.matvecs_rows_serial
        return fn(self.K, common.as_vector(v)[None, :], idx)

    def certificate_pass(
        self, idx: np.ndarray, A: np.ndarray, arow: np.ndarray, rho: np.ndarray, want: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        fn = kprox.certificate_pass if self._parallel(idx.size) else kprox.certificate_pass_serial
        return fn(self.K, idx, common.as_vector(A), arow, common.as_vector(rho), want)


class FactorPasses:
    """The same passes on a factor bank."""

    def __init__(self, bank: FactorBank) -> None:
        self.bank = bank

    def summary(self, bias: bool, n_iter: int) -> tuple[float, float, np.ndarray]:
        lam, omega = lipschitz_estimate(SumOperator(self.bank), bias, n_iter)
        return lam, omega, self.bank.frobenius_norms()

    def matvecs(self, v: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self.bank.matvecs_subset(v, idx)

    def certificate_pass(
        self, idx: np.ndarray, A: np.ndarray, arow: np.ndarray, rho: np.ndarray, want: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        KA = np.zeros((A.shape[0], self.bank.n_samples))
        has = arow >= 0
        if np.any(has):
            KA[arow[has]] = self.bank.matvecs_rows(common.as_vector(A[arow[has]]), idx[has])
        norms = np.zeros(idx.size)
        if np.any(want):
            norms[want] = self.bank.dual_block_norms_subset(rho, idx[want])
        return KA, norms


def passes_for(problem: Any) -> ArrayPasses | FactorPasses:
    bank = problem.bank
    return FactorPasses(bank) if isinstance(bank, FactorBank) else ArrayPasses(problem.K)


@dataclasses.dataclass(slots=True)
class Iterate:
    """A primal point in compact form: the sorted non-zero blocks ``idx``, their coefficients
    ``A`` (P, N) and products ``U`` = :math:`K_m\\alpha_m`, the bias and ``z`` = ``U.sum(0) + b``."""

    idx: np.ndarray
    A: np.ndarray
    U: np.ndarray
    b: float
    z: np.ndarray


def embed(src_idx: np.ndarray, rows: np.ndarray, dst_idx: np.ndarray) -> np.ndarray:
    """Rows of ``src_idx`` placed at their positions in the sorted superset ``dst_idx``."""
    out = np.zeros((dst_idx.size, rows.shape[1] if rows.ndim == 2 else 0))
    if src_idx.size:
        out[np.searchsorted(dst_idx, src_idx)] = rows
    return out


def rows_in(src_idx: np.ndarray, dst_idx: np.ndarray) -> np.ndarray:
    """For each block of the sorted set ``dst_idx``, its row in ``src_idx`` (or -1)."""
    out = np.full(dst_idx.size, -1, dtype=np.int64)
    if src_idx.size:
        out[np.searchsorted(dst_idx, src_idx)] = np.arange(src_idx.size, dtype=np.int64)
    return out


class ScreeningBounds:
    r"""Upper bounds :math:`\|v\|_{K_m} \le \|q\|_{K_m} + \sqrt{\|K_m\|_F}\min(\|v-q\|, \|v+q\|)`
    from reference vectors ``q`` with exact norms, with a relative margin of :math:`10^{-10}`
    for rounding; block ``m`` refers to reference ``ref_id[m]`` (-1: none, bound ``inf``)."""

    def __init__(self, lsq: np.ndarray, N: int) -> None:
        self.lsq = lsq
        M = lsq.size
        self.ref_id = np.full(M, -1, dtype=np.int64)
        self.ref_norm = np.full(M, np.inf)
        self.Q = np.zeros((8, N))
        self.n = 0

    def add(self, vec: np.ndarray, blocks_: np.ndarray, norms: np.ndarray) -> None:
        if blocks_.size == 0:
            return
        if self.n == self.Q.shape[0]:
            self.compact()
            if self.n == self.Q.shape[0]:
                self.Q = np.concatenate([self.Q, np.zeros_like(self.Q)])
        self.Q[self.n] = vec
        self.ref_id[blocks_] = self.n
        self.ref_norm[blocks_] = norms
        self.n += 1

    def bounds(self, v: np.ndarray, blocks_: np.ndarray) -> np.ndarray:
        out = np.full(blocks_.size, np.inf)
        if blocks_.size == 0 or self.n == 0:
            return out
        ids = self.ref_id[blocks_]
        has = ids >= 0
        if not np.any(has):
            return out
        Q = self.Q[: self.n]
        d_minus = np.sqrt(np.maximum(np.einsum("ij,ij->i", Q - v, Q - v), 0.0))
        d_plus = np.sqrt(np.maximum(np.einsum("ij,ij->i", Q + v, Q + v), 0.0))
        dist = np.minimum(d_minus, d_plus)
        b = blocks_[has]
        lsq = self.lsq[b]
        vn = float(np.sqrt(v @ v))
        out[has] = (self.ref_norm[b] + lsq * dist[ids[has]]) * (1.0 + 1e-10) + 1e-12 * lsq * vn
        return out

    def compact(self) -> None:
        """Drop reference vectors that no block uses any more."""
        if self.n == 0:
            return
        used = np.unique(self.ref_id[self.ref_id >= 0])
        if used.size == self.n:
            return
        remap = np.full(self.n, -1, dtype=np.int64)
        remap[used] = np.arange(used.size)
        self.Q[: used.size] = self.Q[used]
        self.n = int(used.size)
        has = self.ref_id >= 0
        self.ref_id[has] = remap[self.ref_id[has]]


class ProximalObjective(Algorithm):
    r"""The problem with the :math:`\mu\|f\|^2` term as the engine sees it, and the certificate
    of an iterate."""

    def __init__(self, engine: Engine, problem: Problem, run: Run, warm_start: SolveResult | None) -> None:
        super().__init__(engine, problem, run, warm_start)
        self.passes = passes_for(problem)
        self.loss = problem.loss
        self.mu = float(engine.mu)

    def prox(self, v: np.ndarray, eta: float) -> np.ndarray:
        r"""Prox of :math:`\eta(\tilde g_C(x) + \mu x^2)` at block norms ``v``."""
        if self.mu == 0.0:
            return self.reg_kernel(self.rk.prox, v, eta * self.C)
        c = 1.0 + 2.0 * eta * self.mu
        return self.reg_kernel(self.rk.prox, common.as_vector(v) / c, eta * self.C / c)

    def reg_value(self, x: np.ndarray) -> float:
        x = common.as_vector(x)
        val = float(np.sum(self.rk.value(x, self.C, self.pr)))
        if self.mu:
            val += self.mu * float(x @ x)
        return val

    def reg_conj(self, ynorm: np.ndarray) -> np.ndarray:
        r"""Conjugate of :math:`\tilde g_C(x) + \mu x^2` at dual block norms."""
        ynorm = common.as_vector(ynorm)
        if self.mu == 0.0:
            return self.reg_kernel(self.rk.conj, ynorm)
        c2 = 2.0 * self.mu
        x = self.reg_kernel(self.rk.prox, ynorm / c2, self.C / c2)
        gx = self.reg_kernel(self.rk.value, x)
        return x * ynorm - gx - self.mu * x * x

    def certificate(self, x: Iterate) -> common.Certificate:
        """Exact primal at (alpha, b*) with the optimal bias b*, and the projected dual; the
        dual block norms that the screening bounds settle are not computed."""
        y = self.y
        f_approx = x.z - x.b
        b_star = 0.0
        if self.bias:
            b_star = common.optimal_bias(self.loss, y, f_approx, x.b, weights=self.sl.w)
        rho = -self.sl.deriv(common.as_vector(f_approx + b_star))
        if self.bias:  # the rounding residue of the sum, removed inside the box
            rho = common.centre_dual(rho, -self.upper, -self.lower)
        allm = np.arange(self.M, dtype=np.int64)
        bnd = self.screen.bounds(rho, allm) if self.engine.screening else np.full(self.M, np.inf)
        harmless = np.isfinite(bnd)
        if np.any(harmless):
            cval = self.reg_conj(bnd[harmless])
            ok = (cval == 0.0) & (bnd[harmless] <= self.radius)
            harmless[np.flatnonzero(harmless)[~ok]] = False
        need = ~harmless
        # one read per kernel: K_m alpha_m (non-zero blocks) and ||rho||_{K_m} (needed)
        act = np.zeros(self.M, dtype=bool)
        act[x.idx] = True
        sel = np.flatnonzero(need | act).astype(np.int64)
        arow = rows_in(x.idx, sel)
        want = need[sel]
        KA, nr = self.passes.certificate_pass(sel, x.A.reshape(x.idx.size, self.N), arow, rho, want)
        norms_rho = bnd.copy()
        norms_rho[sel[want]] = nr[want]
        self.screen.add(rho, sel[want], nr[want])
        self.screen.compact()
        # the carried u_m are not replaced by these products: alpha_m may carry components in
        # the null space of K_m whose rounding would perturb the momentum x - x_prev
        norms = np.sqrt(np.maximum(np.einsum("ij,ij->i", x.A, KA), 0.0)) if x.idx.size else np.zeros(0)
        f = KA.sum(axis=0) if x.idx.size else np.zeros(self.N)
        zs = f + b_star if self.bias else f
        P = float(np.sum(self.sl.value(common.as_vector(zs)))) + self.reg_value(norms)
        extra = {"b_star": b_star, "n_exact": int(np.sum(want))}
        if self.mu == 0.0:
            return common.Certificate.at(self.problem, P, rho, norms, dual_norms=norms_rho, **extra)
        # the conjugate of g_C + mu x^2 has an unbounded domain: rho is feasible as it is
        D = -common.loss_conjugate(self.loss, y, rho, self.sl.w) - float(np.sum(self.reg_conj(norms_rho)))
        return common.Certificate.of(P, D, rho, norms, **extra)

    def offer(self, x: Iterate, cert: common.Certificate, it: int) -> None:
        """Offer a certified iterate to the incumbents."""
        b = cert.extra["b_star"]
        self.run.offer(
            it, primal=cert.primal, alpha=x.A, bias=b, norms=cert.norms, dual=cert.dual, rho=cert.rho, rows=x.idx
        )
