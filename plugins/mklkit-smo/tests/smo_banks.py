"""The kernel bank entries of the shared fixtures (``conftest.py``).

A module of its own with a unique name, so that tests can import it: a bare
``from conftest import ...`` resolves to whichever ``conftest`` module pytest
imported last, which is another directory's when several test directories run
in one session (e.g. ``pytest plugins/mklkit-smo/tests tests``).
"""

from __future__ import annotations

#: A few kernels of different kinds (RBF widths, polynomial degrees, a feature subset).
ENTRIES = [
    {"function": "rbf", "width": [1.0, 5.0], "features": "all"},
    {"function": "poly", "degree": [1, 2], "features": "all"},
    {"function": "rbf", "width": 3.0, "features": [0, 1, 2]},
]
