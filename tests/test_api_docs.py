"""The examples of docs/api.md and docs/plugins.md run as doctests."""

from __future__ import annotations

import doctest
import warnings
from pathlib import Path

import pytest

from mklkit import CompilationWarning

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize(
    "name, at_least", [("api.md", 41), ("plugins.md", 10), ("two_stage.md", 15), ("troubleshooting.md", 9)]
)
def test_doc_examples(one_thread, name, at_least):
    doc = DOCS / name
    assert doc.is_file(), doc
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an example that warns is a broken example
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        # numba compiling on an empty cache (once per process, whichever test is first) is
        # not the example's doing
        warnings.filterwarnings("ignore", category=CompilationWarning)
        failures, tried = doctest.testfile(
            str(doc),
            module_relative=False,
            report=True,
            verbose=False,
            optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        )
    assert tried >= at_least, f"only {tried} examples found in {doc}"
    assert failures == 0, f"{failures} of {tried} examples in {doc} failed (details above)"
