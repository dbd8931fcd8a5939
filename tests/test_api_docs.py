"""The examples of docs/api.md run as doctests."""
from __future__ import annotations

import doctest
import warnings
from pathlib import Path


DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_api_doc_examples(one_thread):
    assert DOC.is_file(), DOC
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an example that warns is a broken example
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        failures, tried = doctest.testfile(
            str(DOC), module_relative=False, report=True, verbose=False,
            optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        )
    assert tried > 40, f"only {tried} examples found in {DOC}"
    assert failures == 0, f"{failures} of {tried} examples in {DOC} failed (details above)"
