"""``mklkit check-plugin``: random parameter points, ``--param``, and plugins that fail to load."""

from __future__ import annotations

import re
import types
import warnings
from typing import Any, Iterator

import pytest

from mklkit import plugins as plugins_mod
from mklkit.cli import main
from mklkit.components.params import ParamError
from mklkit.plugins import ComponentValidationError, PluginWarning, Registry, get_registry, hookimpl

from .conftest import RefPinball, pb_value
from .test_broken_components import SwappedPinball


def run_cli(argv: list[Any], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str, *needles: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def _plugin_module(*classes: type) -> types.ModuleType:
    mod = types.ModuleType("check_plugin_test_module")

    @hookimpl
    def mklkit_register_components(register):
        for cls in classes:
            register(cls)

    mod.mklkit_register_components = mklkit_register_components
    return mod


@pytest.fixture
def pinballs() -> Iterator[None]:
    """``ref_pinball`` (correct) and ``swapped_pinball`` (wrong for tau != 0.5), registered for the test."""
    reg = get_registry()
    name = reg.register_plugin(
        _plugin_module(RefPinball, SwappedPinball), "mklkit-pinballs", "0.1", name="pinballs_test"
    )
    try:
        yield
    finally:
        reg.unregister_plugin(name)


def test_a_bug_away_from_the_defaults_fails_with_the_point_the_seed_and_how_to_reproduce(pinballs, capsys):
    code, out, err = run_cli(["check-plugin", "swapped_pinball"], capsys)
    assert code == 2
    assert "conformance of loss 'swapped_pinball' (SwappedPinball(tau=0.5)) at the default parameters: OK" in out
    heads = re.findall(r"^conformance of .* at random parameter point (\d) of 5: .*$", out, re.M)
    assert len(heads) == 5
    failed = re.findall(
        r"^conformance of loss 'swapped_pinball' \(SwappedPinball\(tau=([0-9.]+)\)\) at random "
        r"parameter point \d of 5: \d+ of \d+ identities FAILED \(seed 0\)$",
        out,
        re.M,
    )
    assert failed
    repro = re.findall(
        r"^  reproduce: (mklkit check-plugin loss:swapped_pinball --param tau=([0-9.]+) "
        r"--random 0 --seed 0)$",
        out,
        re.M,
    )
    assert [tau for _, tau in repro] == failed
    line = one_line_error(code, err, "swapped_pinball failed the conformance checks at")
    assert f"at {len(failed)} of 6 parameter points" in line
    # the command it prints reproduces that point's report line for line
    code2, out2, _ = run_cli(repro[0][0].split()[1:], capsys)
    assert code2 == 2
    head, *body = out2.splitlines()
    assert head.startswith(
        f"conformance of loss 'swapped_pinball' (SwappedPinball(tau={failed[0]})) at the given parameters: "
    )
    first = out.split("\n\n")[[f"tau={failed[0]})" in b.splitlines()[0] for b in out.split("\n\n")].index(True)]
    assert first.splitlines()[1:] == body


def test_correct_component_passes_at_every_point(pinballs, capsys):
    code, out, err = run_cli(["check-plugin", "loss:ref_pinball", "--random", "3", "--seed", "7"], capsys)
    assert code == 0, err
    assert out.count(": OK") == 4 and "FAILED" not in out


def test_param_values_are_checked_and_kept(pinballs, capsys):
    code, out, err = run_cli(["check-plugin", "swapped_pinball", "--param", "tau=0.5", "--random", "0"], capsys)
    assert code == 0, err
    assert out.count("conformance of") == 1 and "(SwappedPinball(tau=0.5)) at the given parameters: OK" in out
    code, out, err = run_cli(["check-plugin", "swapped_pinball", "--param", "tau=0.2"], capsys)
    assert code == 2
    assert out.count("(SwappedPinball(tau=0.2))") == 1  # random points keep tau: one point
    assert "at the given parameters: " in out and "FAILED (seed 0)" in out
    one_line_error(code, err, "at 1 of 1 parameter point ")


@pytest.mark.parametrize(
    "argv, needles",
    [
        (["--param", "tua=0.2"], ["--param tua=0.2: unknown parameter 'tua' (did you mean 'tau'?)", "allowed: tau"]),
        (["--param", "tau=1.5"], ["--param tau=1.5:", "tau must be a number in (0, 1); got 1.5"]),
        (["--param", "tau=abc"], ["--param tau=abc:", "tau must be a number in (0, 1); got 'abc'"]),
        (
            ["--param", "tau"],
            ["--param needs the form name=value; got 'tau'", "allowed: a parameter of loss 'swapped_pinball': tau"],
        ),
        (["--param", "tau=[1,"], ["mklkit check-plugin (--param tau)", "YAML syntax error"]),
        (["--random", "-1"], ["--random: must be an integer >= 0; got -1"]),
        (["--seed", "-2"], ["--seed: must be an integer >= 0; got -2"]),
        (["--random", "x"], ["--random: invalid int value: 'x'"]),
    ],
)
def test_bad_options_are_one_line_errors(pinballs, capsys, argv, needles):
    code, out, err = run_cli(["check-plugin", "swapped_pinball", *argv], capsys)
    one_line_error(code, err, *needles)
    assert out == ""


class FussyPinball(RefPinball):
    """Declares tau in (0, 1) but accepts only 0.5."""

    name = "fussy_pinball"

    def _check(self) -> None:
        if self.tau != 0.5:
            raise ParamError("tau", self.tau, "0.5 (this component's own check)", self.name)


def test_a_class_that_refuses_its_declared_values_fails(capsys):
    reg = get_registry()
    name = reg.register_plugin(_plugin_module(FussyPinball), "mklkit-fussy", "0.1", name="fussy_test")
    try:
        code, out, err = run_cli(["check-plugin", "fussy_pinball"], capsys)
        assert code == 2
        assert "(FussyPinball(tau=0.5)) at the default parameters: OK" in out
        assert "loss fussy_pinball: FAILED: FussyPinball: no parameter point accepted by the class" in out
        one_line_error(code, err, "fussy_pinball failed the conformance checks at 1 of 2 parameter points")
        code, out, err = run_cli(["check-plugin", "fussy_pinball", "--param", "tau=0.2"], capsys)
        one_line_error(
            code, err, "--param tau=0.2: fussy_pinball: tau must be 0.5 (this component's own check); got 0.2"
        )
    finally:
        reg.unregister_plugin(name)


def test_param_of_a_component_without_parameters(capsys):
    code, _, err = run_cli(["check-plugin", "hinge", "--param", "tau=0.2"], capsys)
    one_line_error(code, err, "unknown parameter 'tau'", "allowed: none (loss 'hinge' has no parameters)")


# ---------------------------------------------------------------------------
# a plugin that fails to load
# ---------------------------------------------------------------------------
def _conj_hess_without_njit(y, u, params):
    return y * 0.0


class UnjittedPinball(RefPinball):
    name = "pinball"
    description = "pinball loss with one kernel left without @njit"
    conj_hess = staticmethod(_conj_hess_without_njit)


class _EntryPoint:
    """An installed entry point of the ``mklkit`` group whose plugin fails to register."""

    name = "pinball"
    value = "mklkit_pinball.plugin"
    group = "mklkit"
    dist = types.SimpleNamespace(metadata={"Name": "mklkit-pinball"}, name="mklkit-pinball", version="0.1.0")

    def load(self) -> types.ModuleType:
        return _plugin_module(UnjittedPinball)


@pytest.fixture
def broken_pinball(monkeypatch) -> None:
    with pytest.warns(PluginWarning, match="'pinball'"):
        reg = Registry.load([_EntryPoint()], disabled=())
    assert isinstance(reg.broken[0].error, ComponentValidationError)
    monkeypatch.setattr(plugins_mod, "_registry", reg)


@pytest.mark.parametrize("name", ["pinball", "mklkit-pinball", "mklkit_pinball"])
def test_broken_plugin_says_why_it_has_no_components(broken_pinball, capsys, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out, err = run_cli(["check-plugin", name], capsys)
    one_line_error(
        code,
        err,
        "plugin 'pinball' (mklkit-pinball 0.1.0) could not be loaded",
        "ComponentValidationError",
        "conj_hess must be numba-jitted functions",
    )
    assert out == ""


def test_unknown_name_lists_the_broken_plugins(broken_pinball, capsys):
    code, _, err = run_cli(["check-plugin", "pinbal"], capsys)
    one_line_error(
        code,
        err,
        "no component or plugin named 'pinbal' (did you mean 'pinball'?)",
        "; 1 plugin could not be loaded: pinball (mklkit-pinball 0.1.0): ComponentValidationError",
    )


def test_pb_value_is_jitted():
    # the broken plugin above differs from the reference in one kernel only
    assert hasattr(pb_value, "py_func") and not hasattr(_conj_hess_without_njit, "py_func")
