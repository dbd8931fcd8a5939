"""(b) A component is a numba ``structref``: one field ``params`` (the parameter vector,
as ``param_vector`` today), named parameters read as attributes, and the mathematics as
methods (``overload_method``), compiled into the loops that use them (inlined; cached).

A component author writes a plain class with ``fields`` and scalar methods marked
``@kernel``; :func:`compiled` makes the numba type, registers the methods, and gives a
constructor compiled once per type and cached on disk (:func:`_new`)."""

from __future__ import annotations

import hashlib
import inspect
import math
import os
import sys

import numpy as np
from numba import njit, types
from numba.core.extending import overload_attribute, overload_method
from numba.experimental import structref


def kernel(fn):
    """Mark a method as part of the compiled object."""
    fn._kernel = True
    return fn


def _preprocess(self, fields):
    return tuple((n, types.unliteral(t)) for n, t in fields)


@njit(cache=True)
def _new(t, params):  # pragma: no cover - jitted (once per component type, cached)
    st = structref.new(t)
    st.params = params
    return st


def _typer(fn):
    def typer(*args):
        return fn

    typer.__signature__ = inspect.signature(fn)  # numba matches it against ``fn``'s
    return typer


def compiled(cls):
    """Class decorator: the numba type of ``cls`` (named ``<cls>_nb`` in its module, so
    that cached loops find it again), its methods, and ``cls.jit(params)`` -> the object."""
    mod = sys.modules[cls.__module__]
    tname = cls.__name__ + "_nb"
    typ = type(
        tname,
        (types.StructRef,),
        {"__module__": cls.__module__, "__qualname__": tname, "preprocess_fields": _preprocess},
    )
    structref.register(typ)
    setattr(mod, tname, typ)
    proxy = type(cls.__name__ + "_obj", (structref.StructRefProxy,), {})
    structref.define_boxing(typ, proxy)
    for k, fld in enumerate(getattr(cls, "fields", ())):
        overload_attribute(typ, fld)((lambda k: lambda self: lambda self: self.params[k])(k))
    for meth, fn in list(vars(cls).items()):
        if getattr(fn, "_kernel", False):
            overload_method(typ, meth)(_typer(fn))
    # the loops that inline these methods are cached under the loop's own source file
    # only: a field named after the component's source makes an edit of it a new type
    # (a new cache entry) instead of a stale hit
    with open(inspect.getsourcefile(cls), "rb") as f:
        src = hashlib.sha1(f.read()).hexdigest()[:12]
    fields = [("params", types.float64[::1]), ("src_" + src, types.int8)]
    if os.environ.get("PROTO_NO_SRC_HASH"):  # to show the stale hit (stale_check.py)
        fields = fields[:1]
    inst = typ(fields)
    cls.numba_type = inst
    cls.jit = classmethod(lambda c, params=(): _new(inst, np.ascontiguousarray(params, dtype=np.float64)))
    return cls


# ---------------------------------------------------------------- built-ins
@compiled
class Logistic:
    @kernel
    def value(self, y, z):
        t = -y * z
        return max(t, 0.0) + math.log1p(math.exp(-abs(t)))

    @kernel
    def deriv(self, y, z):
        return -y / (1.0 + math.exp(y * z))

    @kernel
    def lipschitz(self):
        return 0.25


@compiled
class Squared:
    @kernel
    def value(self, y, z):
        return 0.5 * (z - y) ** 2

    @kernel
    def deriv(self, y, z):
        return z - y

    @kernel
    def lipschitz(self):
        return 1.0


@compiled
class GroupLasso:
    @kernel
    def value(self, x, C):
        return C * x

    @kernel
    def prox(self, v, C):
        return max(v - C, 0.0)


@compiled
class ElasticNet:
    fields = ("l1_ratio",)

    @kernel
    def value(self, x, C):
        a = self.l1_ratio
        return C * (a * x + 0.5 * (1.0 - a) * x * x)

    @kernel
    def prox(self, v, C):
        a = self.l1_ratio
        return max(v - C * a, 0.0) / (1.0 + C * (1.0 - a))


LOSSES = {"logistic": (Logistic, 0.25), "squared": (Squared, 1.0)}


def make_loss(name, **kw):
    return LOSSES[name][0].jit()


def make_pen(name, **kw):
    if name == "grouplasso":
        return GroupLasso.jit()
    return ElasticNet.jit([kw.get("l1_ratio", 0.5)])


def lip_of(name):
    return LOSSES[name][1]


from . import loops  # noqa: E402

fit = loops.fit
