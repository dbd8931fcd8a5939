r"""What a jitted loop takes besides arrays: compiled functions by address, records of fixed type.

:func:`first_class` resolves a dispatcher's compiled address once (passed as itself, it is
looked up at every call, about 40 µs per function); :func:`fixed_type` gives a record class
one numba type, so that it is not typed field by field at each call (about 100 µs), and
:func:`check_record` then checks its fields once where they do not come from known types.
The core's loops and the SMO plugin's use them.
"""

from __future__ import annotations

import functools
from typing import Any

from numba import types
from numba.core.typing.typeof import typeof_impl


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


@functools.cache
def first_class(fn: Any, fn_type: types.FunctionType) -> Any:
    """``fn`` as a :class:`FirstClass` for ``fn_type`` (made once per function); anything
    that is not a numba dispatcher (a ``cfunc``, say) is returned as it is."""
    return FirstClass(fn, fn_type) if hasattr(fn, "get_compile_result") else fn


#: The numba type each record class is given (:func:`fixed_type`).
_FIXED: dict[type, types.Type] = {}


def fixed_type(cls: type, typ: types.Type | list) -> types.Type:
    """Type every instance of the record class ``cls`` as ``typ`` (a numba type, or the field
    types of the namedtuple ``cls``) without looking at its fields, and return that type: its
    arrays must then have exactly the layout and dtype ``typ`` declares."""
    if isinstance(typ, list):
        typ = types.BaseTuple.from_types(typ, cls)
    typeof_impl.register(cls)(lambda val, c: typ)
    _FIXED[cls] = typ
    return typ


def check_record(rec: Any, typ: types.Type | None = None) -> Any:
    """``rec``, after checking that every field has the numba type that ``typ`` (by default the
    type :func:`fixed_type` gave its class) declares for it (:class:`TypeError` naming the field
    otherwise)."""
    from numba import typeof

    for name, want, val in zip(type(rec)._fields, (typ or _FIXED[type(rec)]).types, rec):
        got = typeof(val)
        if got != want:
            raise TypeError(f"{type(rec).__name__}.{name} must be {want}; got {got}")
    return rec
