"""Indefinite precomputed kernels are refused by one check, from the command line and the estimators."""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml

from mklkit.estimators import MKLClassifier, MKLRegressor
from mklkit.kernels import BankError
from mklkit.kernels.precomputed import PSD_RTOL, check_psd

pytestmark = pytest.mark.usefixtures("one_thread")

N = 30


def _bank(lam_min: float = -10.0, bad: int = 1) -> np.ndarray:
    """Two Gram matrices (M, N, N); kernel ``bad`` has smallest eigenvalue ``lam_min``."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((2, N, 5))
    K = np.einsum("mik,mjk->mij", A, A) + 0.1 * np.eye(N)
    Q, _ = np.linalg.qr(rng.standard_normal((N, N)))
    w = np.linspace(1.0, 40.0, N)
    w[0] = lam_min
    K[bad] = (Q * w) @ Q.T
    K[bad] = 0.5 * (K[bad] + K[bad].T)
    return K


def _labels() -> np.ndarray:
    return np.where(np.arange(N) % 2 == 0, 1.0, -1.0)


def _eigenvalue(message: str) -> float:
    m = re.search(r"smallest eigenvalue (-?[0-9.e+-]+) < -([0-9.e+-]+) x \|trace\|", message)
    assert m is not None, message
    assert float(m.group(2)) == PSD_RTOL
    return float(m.group(1))


def test_check_names_kernel_eigenvalue_and_tolerance():
    with pytest.raises(BankError, match=r"K\[1\] \('bad'\) is not positive semidefinite") as exc:
        check_psd(_bank(), "K", names=["good", "bad"])
    assert _eigenvalue(str(exc.value)) == pytest.approx(-10.0, rel=1e-6)
    check_psd(_bank(lam_min=1e-3), "K")  # positive definite: accepted
    check_psd(_bank(lam_min=-1e-13), "K")  # rounding-size negative eigenvalue: accepted


@pytest.mark.parametrize("factor,refused", [(0.5, False), (2.0, True)])
def test_the_bound_is_rtol_times_the_trace_on_either_side(factor, refused):
    """The shifted Cholesky test decides as the smallest eigenvalue does, on both sides of the bound."""
    w_rest = np.linspace(1.0, 40.0, N)[1:].sum()
    # lam = -factor * rtol * trace, with trace = w_rest + lam
    lam = -factor * PSD_RTOL * w_rest / (1.0 - factor * PSD_RTOL)
    K = _bank(lam_min=lam)
    before = K.copy()
    if refused:
        with pytest.raises(BankError, match=r"K\[1\] is not positive semidefinite") as exc:
            check_psd(K, "K")
        assert _eigenvalue(str(exc.value)) == pytest.approx(lam, rel=1e-5)  # 6 digits printed
    else:
        check_psd(K, "K")
    assert np.array_equal(K, before)  # not modified


@pytest.mark.parametrize("C", [1.0, "auto"])
@pytest.mark.parametrize("Est", [MKLClassifier, MKLRegressor], ids=lambda c: c.__name__)
def test_estimator_refuses_indefinite_kernels(Est, C):
    K = np.moveaxis(_bank(), 0, -1)  # (N, N, M)
    with pytest.raises(ValueError, match=r"X\[:, :, 1\] is not positive semidefinite") as exc:
        Est("precomputed", C=C).fit(K, _labels())
    assert _eigenvalue(str(exc.value)) == pytest.approx(-10.0, rel=1e-6)


def test_estimator_accepts_psd_kernels():
    K = np.moveaxis(_bank(lam_min=1e-3), 0, -1)
    clf = MKLClassifier("precomputed", C="auto").fit(K, _labels())
    assert np.isfinite(clf.dual_gap_)


def test_cli_refuses_indefinite_kernels(tmp_path, capsys):
    from mklkit.cli import main

    np.savez(tmp_path / "k.npz", K_train=_bank(), y_train=_labels(), names=np.array(["good", "bad"]))
    spec = {
        "kernels": {"precomputed": "k.npz"},
        "problem": {"loss": "logistic", "C": 0.1},
        "output": {"dir": str(tmp_path / "out")},
    }
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    code = main(["run", str(tmp_path / "s.yaml"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "kernels.precomputed" in err and "K_train[1] ('bad') is not positive semidefinite" in err
    assert _eigenvalue(err) == pytest.approx(-10.0, rel=1e-6)
