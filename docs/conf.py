"""Sphinx configuration of mklkit's documentation site.

Build (from the repository root, with the ``docs`` extra installed)::

    sphinx-build -W -b html docs docs/_build/html

The user guide is the Markdown pages of this folder (MyST), the API reference is generated from the
docstrings (autosummary, numpydoc), and the gallery executes the scripts of ``examples/`` (sphinx-gallery).
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "_ext"))

import mklkit  # noqa: E402

project = "mklkit"
author = "the mklkit developers"
copyright = "the mklkit developers"
version = release = mklkit.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "mklkit_cli",
    "mklkit_params",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store", "auto_examples/*.ipynb", "**/*.zip"]
templates_path = ["_templates"]

# -- MyST: the user guide's Markdown pages as they are --------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
myst_dmath_double_inline = True

# -- API reference --------------------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "inherited-members": False, "show-inheritance": True}
autodoc_typehints = "none"  # the numpydoc sections say the types
# the conic reference solver of mklkit.testing.conic needs cvxpy (the test extra); its pages need only its names
autodoc_mock_imports = ["cvxpy", "clarabel"]
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
# The docstring checks that hold for every public object (numpydoc's validation, as warnings: -W makes
# them errors): a docstring with a summary line, sections known and in order, the parameters documented
# in the signature's order and none that the signature lacks.
numpydoc_validation_checks = {"GL06", "GL07", "GL08", "PR02", "PR03", "PR10", "SS01"}
numpydoc_validation_exclude = {
    r"\.__init__$",
    r"\.__call__$",
    r"\._[a-z]",
    # records whose fields are documented by ``#:`` comments beside them (the values have no docstring)
    r"^mklkit\.pipeline\.(Data|Prepared)\.",
    r"^mklkit\.kernels\.builtin_resolver$",
}

# -- Cross-references to the libraries mklkit's users know ------------------------------------------------
INTERSPHINX = {
    "python": "https://docs.python.org/3/",
    "numpy": "https://numpy.org/doc/stable/",
    "scipy": "https://docs.scipy.org/doc/scipy/",
    "sklearn": "https://scikit-learn.org/stable/",
    "matplotlib": "https://matplotlib.org/stable/",
}


def _inventories() -> dict[str, tuple[str, str]]:
    """The inventories reachable now, downloaded once into ``_build/intersphinx`` (offline: none, said; an
    inventory put there by hand as ``NAME.inv``, e.g. from a distribution's documentation package, is used)."""
    cache = HERE / "_build" / "intersphinx"
    cache.mkdir(parents=True, exist_ok=True)
    found = {}
    for name, url in INTERSPHINX.items():
        path = cache / f"{name}.inv"
        if not path.exists():
            try:
                with urllib.request.urlopen(url + "objects.inv", timeout=10) as r:  # noqa: S310 (fixed https URLs)
                    path.write_bytes(r.read())
            except (urllib.error.URLError, OSError) as exc:
                print(f"intersphinx: {name}'s inventory unreachable ({exc}); its names are not linked")
                continue
        found[name] = (url, str(path))
    return found


intersphinx_mapping = _inventories()

# -- The gallery ----------------------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "mklkit_gallery.GalleryOrder",
    "show_memory": False,
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "matplotlib_animations": False,
    "capture_repr": ("_repr_html_",),
    "image_scrapers": ("matplotlib",),
    "min_reported_time": 1,
}

# -- HTML -----------------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"mklkit {release}"
html_static_path = ["_static"]
html_css_files = ["mklkit.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_context = {"default_mode": "light"}
html_show_sourcelink = False
# the landing page and the gallery's pages use the whole width (their navigation is the top bar)
html_sidebars = {"index": [], "auto_examples/*": []}


# -- What a class's page lists ----------------------------------------------------------------------------
def _own_doc(obj: object) -> str | None:
    target = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    return getattr(target, "__doc__", None)


def _skip_member(app: object, what: str, name: str, obj: object, skip: bool, options: object) -> bool | None:
    """Leave out of a class's page the members documented elsewhere: scikit-learn's (``get_params``,
    ``set_*_request``: scikit-learn's documentation has them), and a contract's methods implemented without
    a docstring of their own (their page is the contract's: :class:`mklkit.Loss`, :class:`mklkit.Regularizer`,
    :class:`mklkit.Engine`)."""
    module = getattr(getattr(obj, "fget", obj), "__module__", None) or ""
    if module.startswith("sklearn"):
        return True
    if what == "class" and not _own_doc(obj) and callable(getattr(obj, "fget", obj)):
        return True
    if what == "class" and not callable(obj) and _declared_by_a_base(app, name):
        return True  # a contract's class attribute (``requires``, ``task``...): its page is the contract's
    return skip


def _declared_by_a_base(app: object, name: str) -> bool:
    """Whether the class being documented inherits the attribute ``name`` from a base that declares it
    (the contracts' class attributes, which every component sets)."""
    cls = getattr(app, "_mklkit_class", None)
    return cls is not None and any(name in vars(base) for base in cls.__mro__[1:] if base is not object)


def _note_class(app: object, what: str, name: str, obj: object, options: object, lines: list[str]) -> None:
    if what == "class":
        app._mklkit_class = obj  # type: ignore[attr-defined]


def setup(app: object) -> None:
    app.connect("autodoc-process-docstring", _note_class)  # type: ignore[attr-defined]
    app.connect("autodoc-skip-member", _skip_member)  # type: ignore[attr-defined]
