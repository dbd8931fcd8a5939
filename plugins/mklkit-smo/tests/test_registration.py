"""Registration through the public hook, and the 'separable' contract attribute."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from mklkit.components.base import Regularizer
from mklkit.components.lq import Lq
from mklkit.plugins import ComponentValidationError, Registry, get_registry, hookimpl
from mklkit_smo import PnormSquared, SmoMKL
from mklkit_smo import plugin as smo_plugin


def test_plugin_module_registers_the_engine_and_the_regularizer() -> None:
    reg = Registry()
    reg.register_plugin(smo_plugin, "mklkit-smo", "0.1.0", name="smo")
    assert reg.names("engine") == ["skm_smo", "smo_mkl"]
    assert reg.names("regularizer") == ["l1_squared", "pnorm_squared"]
    record = reg.registration("engine", "smo_mkl")
    assert (record.dist, record.cls) == ("mklkit-smo", SmoMKL)
    created = reg.create("regularizer", {"name": "pnorm_squared", "p": 1.33, "lam": 1.0})
    assert created == PnormSquared(p=1.33, lam=1.0)


def test_installed_entry_point_is_found_by_the_registry() -> None:
    reg = get_registry()
    engine = reg.registration("engine", "smo_mkl")
    regularizer = reg.registration("regularizer", "pnorm_squared")
    assert engine.dist == regularizer.dist == "mklkit-smo"
    assert engine.plugin == "smo"
    assert not [b for b in reg.broken if b.dist == "mklkit-smo"]


def test_mklkit_plugins_lists_both() -> None:
    code = "import sys; from mklkit.cli import main; sys.exit(main(['plugins']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = [ln for ln in out.splitlines() if "mklkit-smo" in ln]
    assert any(ln.split()[:2] == ["engine", "smo_mkl"] for ln in lines)
    assert any(ln.split()[:2] == ["regularizer", "pnorm_squared"] for ln in lines)


def test_separable_must_be_a_bool() -> None:
    class Odd(Regularizer):
        name = "odd_separable"
        description = "a regularizer with a malformed 'separable'"
        value, prox, prox_deriv, conj, conj_grad, conj_hess, env, weight, penalty = (
            staticmethod(getattr(Lq, k)) for k in Regularizer.REQUIRED_KERNELS
        )
        separable = "no"

    class Plugin:
        @staticmethod
        @hookimpl
        def mklkit_register_components(register):
            register(Odd)

    reg = Registry()
    with pytest.raises(ComponentValidationError, match=r"separable must be True or False; got 'no'"):
        reg.register_plugin(Plugin, "test-dist", "0", name="odd")
    assert "odd_separable" not in reg.names("regularizer")


def test_built_in_regularizers_are_separable_by_default() -> None:
    reg = get_registry()
    for name in ("l1", "elasticnet", "lq", "uniform", "kl"):
        assert reg.get("regularizer", name).separable is True
    assert np.isfinite(PnormSquared().q)
