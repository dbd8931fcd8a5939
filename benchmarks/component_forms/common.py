"""Shared pieces of the prototype: the data, the factor bank, the records.

The problem is a group-lasso (or elastic-net) penalized loss on factor blocks,
as in mklkit's ``bcd`` engine:

    min_{beta, b}  sum_i l(y_i, z_i) + sum_m g_C(||beta_m||),  z = sum_m L_m beta_m + b,

on ringnorm (7,400 x 20), 10 groups of 2 features, each block
L_m = [x1, x2, x1 x2, x1^2, x2^2] (standardized): N = 7400, R = 50.
"""

from __future__ import annotations

import os
from collections import namedtuple

import numpy as np

#: ../shared/data beside the checkout (benchmarks/component_forms -> the checkout's parent).
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data")

#: Options of a loop as one typed record (a numba NamedTuple once passed in).
Opts = namedtuple("Opts", ["C", "with_bias", "max_epochs"])
#: The factor bank as one record: L^T (R, N), block starts (M+1,), labels, ||L_m||_2^2.
Bank = namedtuple("Bank", ["LT", "starts", "y", "lip"])
#: The iterate: coefficients (R,), predictions (N,), loss derivative (N,), bias (1,),
#: block curvatures (M,).
State = namedtuple("State", ["beta", "z", "r", "bias", "lam"])


def load_bank(n_groups: int = 10) -> Bank:
    a = np.loadtxt(os.path.join(DATA, "ringnorm.csv.gz"), delimiter=",", skiprows=1)
    X, y = a[:, :-1], a[:, -1]
    X = (X - X.mean(0)) / X.std(0)
    blocks = []
    for m in range(n_groups):
        x1, x2 = X[:, 2 * m], X[:, 2 * m + 1]
        B = np.column_stack([x1, x2, x1 * x2, x1 * x1, x2 * x2])
        B = (B - B.mean(0)) / B.std(0) / np.sqrt(X.shape[0])
        blocks.append(B)
    L = np.hstack(blocks)
    LT = np.ascontiguousarray(L.T)
    starts = np.arange(0, 5 * n_groups + 1, 5, dtype=np.int64)
    lip = np.array([np.linalg.norm(B, 2) ** 2 for B in blocks])
    return Bank(LT, starts, np.ascontiguousarray(y), lip)


def c_max(bank: Bank, deriv0: np.ndarray) -> float:
    """The smallest C with every block zero for the group 1-norm (at the bias-free point)."""
    g = bank.LT @ deriv0
    return max(float(np.linalg.norm(g[s:e])) for s, e in zip(bank.starts[:-1], bank.starts[1:]))


def new_state(bank: Bank, lip_loss: float) -> State:
    R, N = bank.LT.shape
    return State(np.zeros(R), np.zeros(N), np.zeros(N), np.zeros(1), lip_loss * bank.lip)
