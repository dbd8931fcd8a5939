"""The gallery's order: from a first fit to plugins, as a reader meets the questions."""

from __future__ import annotations

ORDER = [
    "plot_quick_start.py",
    "plot_data_sources.py",
    "plot_regularization_path.py",
    "plot_sparsity_accuracy.py",
    "plot_precomputed_gridsearch.py",
    "plot_duality_gap.py",
    "plot_large_n_factor_banks.py",
    "plot_loss_plugin.py",
    "plot_smo_mkl.py",
    "plot_sweep_results.py",
]


class GalleryOrder:
    """sphinx-gallery's ``within_subsection_order``: the scripts of :data:`ORDER` in that order, any other
    after them by name."""

    def __init__(self, src_dir: str) -> None:
        self.src_dir = src_dir

    def __call__(self, filename: str) -> tuple[int, str]:
        return (ORDER.index(filename) if filename in ORDER else len(ORDER), filename)

    def __repr__(self) -> str:  # sphinx-gallery keys its cache on this
        return f"GalleryOrder({ORDER})"
