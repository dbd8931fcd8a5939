"""The bank-build progress bar of ``mklkit run`` (tqdm on a terminal; nothing when quiet or not a terminal)."""

from __future__ import annotations

import sys

import numpy as np

from mklkit.cli.output import BuildBar
from mklkit.kernels import KernelBank

#: 189 Gaussian widths: a bank of 189 kernels on a small data set
BANK = [{"function": "rbf", "width": [float(w) for w in np.geomspace(0.5, 50.0, 189)]}]


def _terminal(monkeypatch, tty: bool = True) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)


def test_the_bar_reaches_the_total_of_each_build(monkeypatch, capsys):
    _terminal(monkeypatch)
    bar = BuildBar(enabled=True)
    X = np.random.default_rng(1).standard_normal((20, 2))
    for k in range(2):
        bank = KernelBank.build(X, BANK, progress=bar)
        assert bank.n_kernels == 189
        err = capsys.readouterr().err
        assert "building kernel bank" in err and "189/189" in err, (k, err)
        assert "kernel/s" in err  # the bar counts kernels
    assert bar.progress.bars == {}  # each build closes its bar; the next one draws a new bar


def test_quiet_or_not_a_terminal_draws_nothing(monkeypatch, capsys):
    X = np.zeros((5, 1)) + np.arange(5)[:, None]
    _terminal(monkeypatch)
    KernelBank.build(X, BANK, progress=BuildBar(enabled=False))
    _terminal(monkeypatch, tty=False)
    KernelBank.build(X, BANK, progress=BuildBar(enabled=True))
    assert capsys.readouterr().err == ""
