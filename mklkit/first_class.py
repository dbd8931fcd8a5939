r"""What a jitted loop takes besides arrays: compiled functions by address, records of fixed type.

A loop compiled once for every component receives the component's kernels as
first-class functions (numba ``FunctionType``) and groups its other arguments into
records (named tuples).  Two things make that cheap at each call:

* :class:`FirstClass` (made by :func:`first_class`) resolves a dispatcher's compiled
  address once; passed as itself, a dispatcher is looked up at every call of a loop
  (about 40 µs per function).
* :func:`fixed_type` registers a record class with one numba type, so an argument of
  that class is typed without looking at its fields (typing a named tuple field by
  field costs about 100 µs per call).  The price: numba no longer checks the fields,
  so a builder checks them once (:func:`check_record`) where they do not come from
  known types.

The core's loops (:mod:`mklkit._jit.records`, :mod:`mklkit._jit.dual_cd`) and a
plugin's (``mklkit_smo._records``) use the same four names.
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.core.typing.typeof import typeof_impl

__all__ = ["FirstClass", "first_class", "fixed_type", "check_record"]


class FirstClass(types.WrapperAddressProtocol):
    """A jitted function passed into a loop by its compiled address (resolved once)."""

    def __init__(self, fn: Any, fn_type: types.FunctionType) -> None:
        self._type = fn_type
        self._sig = fn_type.signature
        self._cres = fn.get_compile_result(self._sig)  # keeps the code alive
        self._addr = self._cres.library.get_pointer_to_function(self._cres.fndesc.llvm_cfunc_wrapper_name)
        self.__name__ = getattr(fn, "__name__", "kernel")

    def __wrapper_address__(self) -> int:
        return self._addr

    def signature(self) -> Any:
        return self._sig


@typeof_impl.register(FirstClass)
def _typeof_first_class(val: FirstClass, c: Any) -> types.FunctionType:
    # numba's own rule for the protocol builds a new FunctionType at every call
    return val._type


_FIRST_CLASS: dict = {}


def first_class(fn: Any, fn_type: types.FunctionType) -> Any:
    """``fn`` as a :class:`FirstClass` for ``fn_type`` (made once per function); anything
    that is not a numba dispatcher (a ``cfunc``, say) is returned as it is."""
    if not hasattr(fn, "get_compile_result"):
        return fn
    key = (fn, fn_type)
    out = _FIRST_CLASS.get(key)
    if out is None:
        out = _FIRST_CLASS[key] = FirstClass(fn, fn_type)
    return out


def fixed_type(cls: type, typ: types.Type) -> None:
    """Type every instance of the record class ``cls`` as ``typ`` without looking at its
    fields: its arrays must then have exactly the layout and dtype ``typ`` declares."""
    typeof_impl.register(cls)(lambda val, c: typ)


def check_record(rec: Any, typ: types.Type) -> Any:
    """``rec`` itself, after checking that every field has the numba type ``typ`` declares
    for it (a record of fixed type is not typed at a call, so a wrong field would be
    read as the declared type); raises :class:`TypeError` naming the field."""
    from numba import typeof

    for name, want, val in zip(type(rec)._fields, typ.types, rec):
        got = typeof(val)
        if got != want:
            raise TypeError(f"{type(rec).__name__}.{name} must be {want}; got {got}")
    return rec
