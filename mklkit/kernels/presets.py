"""Kernel-bank presets from the MKL literature, usable by name wherever a bank description is."""

from __future__ import annotations

import copy
from typing import Any

from ..components.params import unknown_name

#: Gaussian widths of SpicyMKL §6.1: 0.1 0.25 0.5 0.75 1 2 3 ... 20 (24 values).
SIMPLEMKL_WIDTHS: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75) + tuple(float(w) for w in range(1, 21))

#: Gaussian widths of the SimpleMKL toolbox examples, used by SMO-MKL §6 (10 values).
SMOMKL_WIDTHS: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 7.0, 10.0, 12.0, 15.0, 17.0, 20.0)


def _grid(widths: tuple[float, ...]) -> list[dict[str, Any]]:
    return [
        {"function": "rbf", "width": list(widths), "features": "all"},
        {"function": "rbf", "width": list(widths), "features": "each"},
        {"function": "poly", "degree": [1, 2, 3], "features": "all"},
        {"function": "poly", "degree": [1, 2, 3], "features": "each"},
    ]


SIMPLEMKL_DOC = """\
SpicyMKL §6.1 (Suzuki & Tomioka 2011), after SimpleMKL: Gaussian kernels with
the 24 widths 0.1 0.25 0.5 0.75 1 2 3 ... 20 and polynomial kernels
(<x,z> + 1)^p of degree p = 1, 2, 3, each applied to every single feature and
jointly to all features: 27 x (d + 1) kernels for d features (sonar, d = 60:
1647).  The paper normalises every kernel to unit trace (normalize="trace")."""

SMOMKL_DOC = """\
SMO-MKL §6 (Vishwanathan et al. 2010): "RBF kernels with ten bandwidths for
each individual dimension of the feature vector as well as the full feature
vector itself ... polynomial kernels of degree 1, 2 and 3", generated "as
recommended in" SimpleMKL (their ref. [16]), unit trace.  The paper does not
list the ten bandwidths; we use those of the SimpleMKL toolbox's example
scripts, 0.5 1 2 5 7 10 12 15 17 20, which is what "as recommended in
SimpleMKL" points to.  That gives 13 x (d + 1) kernels, which reproduces the
kernel counts M of SMO-MKL Table 1 with the full feature counts of the data
files: liver d = 6 -> 91, australian d = 14 -> 195, sonar d = 60 -> 793, and
ionosphere with its constant column x2 dropped, d = 33 -> 442 (Table 1 lists
D one below these d)."""

#: name -> (entries, description)
PRESETS: dict[str, tuple[list[dict[str, Any]], str]] = {
    "simplemkl": (_grid(SIMPLEMKL_WIDTHS), SIMPLEMKL_DOC),
    "smomkl": (_grid(SMOMKL_WIDTHS), SMOMKL_DOC),
}


def available_presets() -> list[str]:
    """Names of the presets."""
    return list(PRESETS)


def preset_entries(name: str) -> list[dict[str, Any]]:
    """A fresh copy of a preset's bank entries (``LookupError`` for an unknown name)."""
    if name not in PRESETS:
        raise LookupError(unknown_name("kernel-bank preset", name, available_presets()))
    return copy.deepcopy(PRESETS[name][0])
