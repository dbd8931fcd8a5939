"""PNG plots of a run directory (``mklkit report OUT``): ``gap.png``, ``active.png``, ``weights.png``
(``docs/specs.md``).  matplotlib (the ``plot`` extra) is imported only when a plot is drawn, without
pyplot: the Agg canvas is used directly.
"""

from __future__ import annotations

import math
import os
import textwrap
from pathlib import Path
from typing import Any, Callable

from .io import REPORT_FILES, OutputError, atomic_write, read_history, read_summary

#: File names written by :func:`plot_run`.
PLOTS: tuple[str, ...] = REPORT_FILES
#: What the plots of a run with every kernel off say.
TRIVIAL_NOTE = "all kernels off (C \u2265 C_max)"


class ReportError(OutputError):
    """A report that cannot be drawn (missing matplotlib, missing run files)."""


def _matplotlib() -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ReportError(
            "matplotlib",
            "is not installed; plots need the optional 'plot' extra",
            "pip install 'mklkit[plot]' (or pip install matplotlib)",
        ) from None
    return Figure, FigureCanvasAgg


def _figure(size: tuple[float, float] = (6.4, 4.0)) -> Any:
    Figure, Canvas = _matplotlib()
    fig = Figure(figsize=size, dpi=100, layout="constrained")
    Canvas(fig)
    return fig


def _save(fig: Any, summary: dict[str, Any], path: Path) -> Path:
    """Give ``fig`` the run's title, wrapped to the figure's width (about 6.2 px a character at 9 pt),
    and write it atomically."""
    s, spec = summary, summary.get("spec", {})
    prob = spec.get("problem", {}) if isinstance(spec, dict) else {}
    loss = s.get("loss") or (prob.get("loss") or {}).get("name", "")
    reg = s.get("regularizer") or (prob.get("regularizer") or {}).get("name", "")
    C = s.get("C")
    c_text = f", C={C:g}" if isinstance(C, (int, float)) else ""
    title = f"{s.get('dataset', '')}: {loss} + {reg}{c_text} ({s.get('engine', '')}, {s.get('status', '?')})"
    width = max(30, int(fig.get_figwidth() * 100 / 6.2))
    lines = [w for line in title.split("\n") for w in (textwrap.wrap(line, width) or [""])]
    fig.suptitle("\n".join(lines), fontsize=9)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"), suffix=".png")


def trivial_note(summary: dict[str, Any]) -> str | None:
    """``all kernels off (C ≥ C_max)`` with the values, for a run whose model is a constant; else None."""
    trivial = summary.get("trivial")
    if trivial is None:  # summaries written before the key existed
        trivial = summary.get("n_active_kernels") == 0 and bool(summary.get("kernel_weights"))
    if not trivial:
        return None
    C, C_max = summary.get("C"), summary.get("C_max")
    values = f": C = {C:.6g}, C_max = {C_max:.6g}" if _finite(C) and _finite(C_max) else ""
    return f"{TRIVIAL_NOTE}{values}\nthe model predicts a constant; use a C below C_max"


def _note(fig: Any, ax: Any, text: str, summary: dict[str, Any], path: Path) -> Path:
    """The whole plot is one centred note (no empty frame)."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11, wrap=True)
    return _save(fig, summary, path)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _per_iteration(
    summary: dict[str, Any], history: list[dict[str, Any]], key: str, path: Path, draw: Callable
) -> Path:
    """One plot of ``history[key]`` per outer iteration (finite values only): ``draw(ax, points)``."""
    from matplotlib.ticker import MaxNLocator

    fig = _figure()
    ax = fig.add_subplot()
    note = trivial_note(summary)
    if note is not None:
        return _note(fig, ax, note, summary, path)
    pts = [(r.get("iteration", i + 1), r.get(key)) for i, r in enumerate(history)]
    draw(ax, [(i, v) for i, v in pts if _finite(v)])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("outer iteration")
    return _save(fig, summary, path)


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)


def plot_gap(summary: dict[str, Any], history: list[dict[str, Any]], path: Path) -> Path:
    """Relative duality gap per iteration, log scale."""

    def draw(ax: Any, pts: list[tuple[int, float]]) -> None:
        pos = [(i, g) for i, g in pts if g > 0]
        if pos:
            ax.semilogy([i for i, _ in pos], [g for _, g in pos], marker="o", ms=3, label="relative duality gap")
            tol = summary.get("tol")
            if _finite(tol) and tol > 0:
                ax.axhline(tol, color="gray", ls="--", lw=1, label=f"tol = {tol:g}")
            ax.legend(loc="best")
        else:
            _empty(ax, "no positive duality gaps recorded")
        ax.set_ylabel("relative duality gap")
        ax.grid(True, which="both", alpha=0.3)

    return _per_iteration(summary, history, "gap", path, draw)


def plot_active(summary: dict[str, Any], history: list[dict[str, Any]], path: Path) -> Path:
    """Number of active kernels per iteration."""

    def draw(ax: Any, pts: list[tuple[int, float]]) -> None:
        if pts:
            ax.step([i for i, _ in pts], [a for _, a in pts], where="post", marker="o", ms=3)
        else:
            _empty(ax, "no iterations recorded")
        M = summary.get("n_kernels")
        ax.set_ylabel("active kernels" + (f" (of {M})" if M else ""))
        ax.set_ylim(0, max((a for _, a in pts), default=0) * 1.1 + 1)
        ax.grid(True, alpha=0.3)

    return _per_iteration(summary, history, "n_active", path, draw)


def _bars(ax: Any, labels: list[str], values: list[float], color: str) -> None:
    """Horizontal bars, the first on top, labelled with their values."""
    y = list(range(len(values)))[::-1]
    bars = ax.barh(y, values, color=color)
    ax.set_yticks(y, labels, fontsize=8)
    ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=2)
    ax.set_xlim(0, max(values) * 1.25)


def plot_weights(summary: dict[str, Any], path: Path, top_k: int = 15) -> Path:
    """Bars of the ``top_k`` largest kernel weights, labelled by kernel name, and their spread.

    With more than ``top_k`` active kernels a second panel shows where the rest of the weight is:
    summed per bank kernel over the features it was applied to (names ``<kernel>[<features>]``) when
    that groups them, else the sorted weights of all active kernels.
    """
    weights = [w for w in summary.get("kernel_weights", []) if isinstance(w, dict) and _finite(w.get("weight"))]
    weights.sort(key=lambda w: -w["weight"])
    nonzero = [w for w in weights if w["weight"] > 0]
    shown = nonzero[:top_k]
    note = trivial_note(summary)
    if note is not None or not shown:
        fig = _figure()
        return _note(fig, fig.add_subplot(), note or "no active kernels", summary, path)
    groups: dict[str, list[float]] = {}
    for w in nonzero:
        name = str(w.get("name", ""))  # rbf(width=0.5)[x3] belongs to rbf(width=0.5)
        groups.setdefault(name.split("[", 1)[0] if name.endswith("]") and "[" in name else name, []).append(w["weight"])
    spread = len(nonzero) > len(shown)
    fig = _figure((13.0 if spread else 7.5, max(3.0, 0.3 * (len(shown) + 2) + 1.4)))
    ax = fig.add_subplot(1, 2, 1) if spread else fig.add_subplot()
    _bars(ax, [str(w.get("name", w.get("index", "?"))) for w in shown], [w["weight"] for w in shown], "C0")
    ax.set_xlabel("kernel weight d_m")
    others = len(nonzero) - len(shown)
    tail = f"; the other {others} hold {sum(w['weight'] for w in nonzero[top_k:]):.3g}" if others > 0 else ""
    M = summary.get("n_kernels", len(weights))
    ax.set_title(f"top {len(shown)} of {len(nonzero)} active kernels (M = {M}){tail}", fontsize=9)
    if spread:
        ax2 = fig.add_subplot(1, 2, 2)
        if 1 < len(groups) < len(nonzero):
            ranked = sorted(groups.items(), key=lambda g: -sum(g[1]))[:top_k]
            _bars(ax2, [f"{g} ({len(v)})" for g, v in ranked], [sum(v) for _, v in ranked], "C1")
            ax2.set_xlabel("total weight (number of active kernels)")
            ax2.set_title(f"weight per bank kernel, summed over features ({len(groups)} kernels)", fontsize=9)
        else:
            ax2.plot(range(1, len(nonzero) + 1), [w["weight"] for w in nonzero], color="C1")
            ax2.axvline(len(shown) + 0.5, color="gray", ls="--", lw=1, label=f"top {len(shown)}")
            ax2.set_xlabel("rank of the active kernel")
            ax2.set_ylabel("kernel weight d_m")
            ax2.set_title(f"all {len(nonzero)} active weights, sorted", fontsize=9)
            ax2.legend(loc="best")
            ax2.grid(True, alpha=0.3)
    return _save(fig, summary, path)


def plot_run(run_dir: str | os.PathLike[str], top_k: int = 15) -> list[Path]:
    """Write ``gap.png``, ``active.png`` and ``weights.png`` into a run directory.  Raises
    :class:`ReportError` without matplotlib, :class:`OutputError` without a readable ``summary.json``."""
    summary, history = read_summary(run_dir), read_history(run_dir)
    _matplotlib()
    out = Path(run_dir)
    return [
        plot_gap(summary, history, out / "gap.png"),
        plot_active(summary, history, out / "active.png"),
        plot_weights(summary, out / "weights.png", top_k=top_k),
    ]
