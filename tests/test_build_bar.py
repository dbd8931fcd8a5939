"""The bank-build progress bar of ``mklkit run`` without tqdm: one final line per build."""
from __future__ import annotations

import sys

import numpy as np

from mklkit.cli import _BuildBar
from mklkit.kernels import KernelBank

#: 189 Gaussian widths: a bank of 189 kernels on a small data set
BANK = [{"function": "rbf", "width": [float(w) for w in np.geomspace(0.5, 50.0, 189)]}]


def _plain_terminal(monkeypatch) -> None:
    """stderr as a terminal, and tqdm not installed (the fallback bar)."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setitem(sys.modules, "tqdm", None)


def test_the_fallback_bar_prints_its_final_line_once(monkeypatch, capsys):
    _plain_terminal(monkeypatch)
    X = np.random.default_rng(0).standard_normal((30, 3))
    bank = KernelBank.build(X, BANK, progress=_BuildBar(enabled=True))
    assert bank.n_kernels == 189
    err = capsys.readouterr().err
    assert err.count("189/189") == 1, err
    assert err.endswith("\n") and "building kernel bank" in err


def test_each_build_gets_its_final_line(monkeypatch, capsys):
    _plain_terminal(monkeypatch)
    bar = _BuildBar(enabled=True)
    X = np.random.default_rng(1).standard_normal((20, 2))
    for _ in range(2):
        KernelBank.build(X, BANK[:1], progress=bar)
    assert capsys.readouterr().err.count("189/189") == 2


def test_quiet_draws_nothing(monkeypatch, capsys):
    _plain_terminal(monkeypatch)
    KernelBank.build(np.zeros((5, 1)) + np.arange(5)[:, None], BANK, progress=_BuildBar(enabled=False))
    assert capsys.readouterr().err == ""
