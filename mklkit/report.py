"""PNG plots of a run directory (``mklkit report OUT``).

``gap.png``
    Relative duality gap per outer iteration (log scale) with the tolerance.
``active.png``
    Number of active kernels per outer iteration.
``weights.png``
    The largest kernel weights, labelled with the kernel names.

matplotlib is the optional ``plot`` extra (``pip install 'mklkit[plot]'``); it
is imported only here, when a plot is drawn, and without pyplot (the Agg
canvas is used directly, so no display or global figure state is involved).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from .io import REPORT_FILES, OutputError, read_history, read_summary

__all__ = ["ReportError", "PLOTS", "plot_run", "plot_gap", "plot_active", "plot_weights"]

#: File names written by :func:`plot_run`.
PLOTS: tuple[str, ...] = REPORT_FILES


class ReportError(OutputError):
    """A report that cannot be drawn (missing matplotlib, missing run files)."""


def _matplotlib() -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ReportError(
            "matplotlib", "is not installed; plots need the optional 'plot' extra",
            "pip install 'mklkit[plot]' (or pip install matplotlib)",
        ) from None
    return Figure, FigureCanvasAgg


def _figure(size: tuple[float, float] = (6.4, 4.0)) -> Any:
    Figure, Canvas = _matplotlib()
    fig = Figure(figsize=size, dpi=100, layout="constrained")
    Canvas(fig)
    return fig


def _save(fig: Any, path: Path) -> Path:
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, format="png")
    os.replace(tmp, path)
    return path


def _title(summary: dict[str, Any]) -> str:
    spec = summary.get("spec", {})
    prob = spec.get("problem", {}) if isinstance(spec, dict) else {}
    loss = summary.get("loss") or (prob.get("loss") or {}).get("name", "")
    reg = summary.get("regularizer") or (prob.get("regularizer") or {}).get("name", "")
    ds = summary.get("dataset", "")
    eng = summary.get("engine", "")
    C = summary.get("C")
    c_text = f", C={C:g}" if isinstance(C, (int, float)) else ""
    return f"{ds}: {loss} + {reg}{c_text} ({eng}, {summary.get('status', '?')})"


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _integer_x(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def plot_gap(summary: dict[str, Any], history: list[dict[str, Any]], path: Path) -> Path:
    """Relative duality gap per iteration, log scale."""
    fig = _figure()
    ax = fig.add_subplot()
    pts = [(r.get("iteration", i + 1), r.get("gap")) for i, r in enumerate(history)]
    pts = [(i, g) for i, g in pts if _finite(g)]
    pos = [(i, g) for i, g in pts if g > 0]
    if pos:
        ax.semilogy([i for i, _ in pos], [g for _, g in pos], marker="o", ms=3, label="relative duality gap")
        tol = summary.get("tol")
        if _finite(tol) and tol > 0:
            ax.axhline(tol, color="gray", ls="--", lw=1, label=f"tol = {tol:g}")
        ax.legend(loc="best")
    else:
        ax.text(0.5, 0.5, "no positive duality gaps recorded", ha="center", va="center", transform=ax.transAxes)
    _integer_x(ax)
    ax.set_xlabel("outer iteration")
    ax.set_ylabel("relative duality gap")
    ax.set_title(_title(summary), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, path)


def plot_active(summary: dict[str, Any], history: list[dict[str, Any]], path: Path) -> Path:
    """Number of active kernels per iteration."""
    fig = _figure()
    ax = fig.add_subplot()
    pts = [(r.get("iteration", i + 1), r.get("n_active")) for i, r in enumerate(history)]
    pts = [(i, a) for i, a in pts if _finite(a)]
    if pts:
        ax.step([i for i, _ in pts], [a for _, a in pts], where="post", marker="o", ms=3)
    else:
        ax.text(0.5, 0.5, "no iterations recorded", ha="center", va="center", transform=ax.transAxes)
    M = summary.get("n_kernels")
    _integer_x(ax)
    ax.set_xlabel("outer iteration")
    ax.set_ylabel("active kernels" + (f" (of {M})" if M else ""))
    top = max((a for _, a in pts), default=0)
    ax.set_ylim(0, top * 1.1 + 1)
    ax.set_title(_title(summary), fontsize=9)
    ax.grid(True, alpha=0.3)
    return _save(fig, path)


def plot_weights(summary: dict[str, Any], path: Path, top_k: int = 15) -> Path:
    """Horizontal bars of the ``top_k`` largest kernel weights, labelled by kernel name."""
    weights = [w for w in summary.get("kernel_weights", []) if isinstance(w, dict) and _finite(w.get("weight"))]
    weights.sort(key=lambda w: -w["weight"])
    nonzero = [w for w in weights if w["weight"] > 0]
    shown = nonzero[:top_k]
    rest = sum(w["weight"] for w in nonzero[top_k:])
    fig = _figure((7.5, max(3.0, 0.3 * (len(shown) + 2) + 1.2)))
    ax = fig.add_subplot()
    if shown:
        labels = [str(w.get("name", w.get("index", "?"))) for w in shown]
        values = [w["weight"] for w in shown]
        y = list(range(len(values)))[::-1]
        bars = ax.barh(y, values, color="C0")
        ax.set_yticks(y, labels, fontsize=8)
        ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=2)
        ax.set_xlim(0, max(values) * 1.2)
    else:
        ax.text(0.5, 0.5, "no active kernels", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    M = summary.get("n_kernels", len(weights))
    ax.set_xlabel("kernel weight d_m")
    others = len(nonzero) - len(shown)
    tail = f"; the other {others} hold {rest:.3g} of the total weight" if others > 0 else ""
    ax.set_title(f"top {len(shown)} of {len(nonzero)} active kernels (M = {M}){tail}\n{_title(summary)}", fontsize=9)
    return _save(fig, path)


def plot_run(run_dir: str | os.PathLike[str], top_k: int = 15) -> list[Path]:
    """Write ``gap.png``, ``active.png`` and ``weights.png`` into a run directory.

    Raises
    ------
    ReportError
        matplotlib missing (the ``plot`` extra).
    OutputError
        ``run_dir`` has no readable ``summary.json``.
    """
    summary = read_summary(run_dir)
    history = read_history(run_dir)
    _matplotlib()
    out = Path(run_dir)
    return [
        plot_gap(summary, history, out / "gap.png"),
        plot_active(summary, history, out / "active.png"),
        plot_weights(summary, out / "weights.png", top_k=top_k),
    ]
