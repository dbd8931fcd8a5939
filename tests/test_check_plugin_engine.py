"""``mklkit check-plugin engine:NAME`` runs the engine conformance kit (``mklkit.testing.check_engine``)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from mklkit.cli import main
from mklkit.engines.spicy import Spicy
from mklkit.result import Status
from mklkit.testing import ENGINE_CHECKS, registered


class ZeroGap(Spicy):
    """Claims a zero gap (and convergence) whatever it reached."""

    name = "zero_gap"
    description = "claims a zero gap whatever it reached"

    def _solve(self, problem, run, warm_start):
        res = super()._solve(problem, run, warm_start)
        return dataclasses.replace(res, gap=0.0, status=Status.CONVERGED)


@pytest.fixture
def zero_gap_installed():
    with registered(ZeroGap, dist="mklkit-zero-gap"):
        yield


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_engine_is_checked_by_the_engine_kit(capsys):
    code = main(["check-plugin", "engine:spicy", "--max-problems", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("conformance of engine 'spicy'") and out.splitlines()[0].endswith(": OK"), out
    for name in ENGINE_CHECKS:
        assert any(line.split()[:2] == ["PASS", name] for line in out.splitlines()), (name, out)
    # --param sets the engine's options
    code = main(["check-plugin", "engine:spicy", "--param", "tol=1e-6", "--max-problems", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Spicy(tol=1e-06" in out.splitlines()[0]


def test_a_dishonest_engine_fails_with_the_command_that_reproduces_it(capsys, zero_gap_installed):
    code = main(["check-plugin", "engine:zero_gap", "--param", "max_iter=1", "--max-problems", "1", "--seed", "3"])
    out, err = capsys.readouterr()
    line = one_line_error(code, err)
    assert re.search(r"engine:zero_gap.*failed.*1 of 1 parameter point", line), line
    assert any(row.split()[:2] == ["FAIL", "gap_consistent"] for row in out.splitlines()), out
    assert "reproduce: mklkit check-plugin engine:zero_gap --param max_iter=1 --seed 3 --max-problems 1" in out


def test_engine_errors_name_what_is_allowed(capsys):
    code = main(["check-plugin", "engine:spicey"])
    line = one_line_error(code, capsys.readouterr().err)
    assert "'spicey'" in line and "did you mean 'spicy'" in line and "engine:spicy" in line and "engine:bcd" in line
    code = main(["check-plugin", "engine:spicy", "--param", "tol=-1"])
    line = one_line_error(code, capsys.readouterr().err)
    assert "--param tol=-1" in line and "tol must be a number > 0" in line
    code = main(["check-plugin", "engine:spicy", "--param", "tolx=1"])
    line = one_line_error(code, capsys.readouterr().err)
    assert "unknown parameter 'tolx'" in line and "allowed: tol, max_iter" in line
    code = main(["check-plugin", "engine:spicy", "--max-problems", "0"])
    line = one_line_error(code, capsys.readouterr().err)
    assert "--max-problems" in line and "got 0" in line and ">= 1" in line
    # kernels have no conformance kit
    code = main(["check-plugin", "kernel:rbf"])
    line = one_line_error(code, capsys.readouterr().err)
    assert "kernel 'rbf'" in line and "allowed: a loss, regularizer, engine, weighting or multiclass_loss name" in line
