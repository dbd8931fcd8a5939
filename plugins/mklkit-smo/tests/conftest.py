"""Shared fixtures: small real problems from the bundled data sets."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mklkit.data import load_builtin  # noqa: E402
from mklkit.kernels import KernelBank  # noqa: E402
from mklkit.plugins import get_registry  # noqa: E402
from smo_banks import ENTRIES  # noqa: E402


def standardize(X: np.ndarray) -> np.ndarray:
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


@pytest.fixture(scope="session")
def registry():
    return get_registry()


@pytest.fixture(scope="session")
def sonar_small():
    """80 points of sonar (classification), standardized, with the bank of ENTRIES."""
    ds = load_builtin("sonar")
    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(ds.n_samples, 80, replace=False))
    X = standardize(ds.X[idx])
    bank = KernelBank.build(X, ENTRIES, normalize="trace")
    return X, ds.y[idx].copy(), bank


@pytest.fixture(scope="session")
def liver_regression():
    """90 points of liver: regress the standardized 'drinks' on the five blood tests."""
    ds = load_builtin("liver")
    rng = np.random.default_rng(1)
    idx = np.sort(rng.choice(ds.n_samples, 90, replace=False))
    X = standardize(ds.X[idx][:, :5])
    y = ds.X[idx][:, 5]
    y = (y - y.mean()) / y.std()
    bank = KernelBank.build(X, ENTRIES, normalize="trace")
    return X, y, bank
