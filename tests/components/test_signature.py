"""Every registered component's call signature is its declared parameters (help(), IDEs, the API reference)."""

from __future__ import annotations

import inspect

import pytest

from mklkit.plugins import get_registry

KINDS = ("loss", "regularizer", "engine", "kernel", "weighting", "multiclass_loss")


@pytest.mark.parametrize("kind", KINDS)
def test_signature_is_the_declared_parameters(kind):
    regs = list(get_registry().registrations(kind))
    assert regs
    for r in regs:
        sig = inspect.signature(r.cls)
        assert list(sig.parameters) == [p.name for p in r.cls.params], r.name
        for p in r.cls.params:
            got = sig.parameters[p.name]
            assert got.kind is inspect.Parameter.KEYWORD_ONLY
            want = inspect.Parameter.empty if p.required else p.default
            assert got.default is want or got.default == want, (r.name, p.name)
        # the signature binds what the constructor accepts: the defaults build an instance
        sig.bind(**{p.name: p.default for p in r.cls.params if not p.required})
