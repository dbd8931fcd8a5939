"""PNG plots of a run directory (``mklkit report OUT``).

``gap.png``
    Relative duality gap per outer iteration (log scale) with the tolerance.
``active.png``
    Number of active kernels per outer iteration.
``weights.png``
    The largest kernel weights, labelled with the kernel names; with more
    active kernels than bars, a second panel shows how the weight spreads:
    the total weight of each kernel of the bank summed over the features it
    was applied to (``rbf(width=0.5)`` for ``rbf(width=0.5)[x3]``,
    ``[x4]``, ...), or the sorted weights when the names do not group.

A run with every kernel off (``C >= C_max``: ``"trivial": true`` in
``summary.json``) draws each plot as the one line
``all kernels off (C ≥ C_max)`` with C and C_max, instead of empty axes.

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

__all__ = [
    "ReportError",
    "PLOTS",
    "TRIVIAL_NOTE",
    "plot_run",
    "plot_gap",
    "plot_active",
    "plot_weights",
    "trivial_note",
]

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


#: What the plots of a run with every kernel off say.
TRIVIAL_NOTE = "all kernels off (C \u2265 C_max)"


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


def _note(fig: Any, ax: Any, text: str, summary: dict[str, Any]) -> None:
    """The whole plot is one centred note (no empty frame)."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11, wrap=True)
    _suptitle(fig, _title(summary))


def _suptitle(fig: Any, text: str) -> None:
    """A figure title wrapped to the figure's width, so that no line is clipped."""
    import textwrap

    width = max(30, int(fig.get_figwidth() * 100 / 6.2))  # about 6.2 px a character at 9 pt
    lines = [w for line in text.split("\n") for w in (textwrap.wrap(line, width) or [""])]
    fig.suptitle("\n".join(lines), fontsize=9)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _integer_x(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def plot_gap(summary: dict[str, Any], history: list[dict[str, Any]], path: Path) -> Path:
    """Relative duality gap per iteration, log scale."""
    fig = _figure()
    ax = fig.add_subplot()
    note = trivial_note(summary)
    if note is not None:
        _note(fig, ax, note, summary)
        return _save(fig, path)
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
    _suptitle(fig, _title(summary))
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, path)


def plot_active(summary: dict[str, Any], history: list[dict[str, Any]], path: Path) -> Path:
    """Number of active kernels per iteration."""
    fig = _figure()
    ax = fig.add_subplot()
    note = trivial_note(summary)
    if note is not None:
        _note(fig, ax, note, summary)
        return _save(fig, path)
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
    _suptitle(fig, _title(summary))
    ax.grid(True, alpha=0.3)
    return _save(fig, path)


def _group(name: str) -> str:
    """The bank kernel a name belongs to: ``rbf(width=0.5)[x3]`` -> ``rbf(width=0.5)``."""
    return name.split("[", 1)[0] if name.endswith("]") and "[" in name else name


def plot_weights(summary: dict[str, Any], path: Path, top_k: int = 15) -> Path:
    """Bars of the ``top_k`` largest kernel weights, labelled by kernel name, and their spread.

    With more than ``top_k`` active kernels a second panel shows where the
    rest of the weight is: summed per bank kernel over the features it was
    applied to (names ``<kernel>[<features>]``) when that groups them, else
    the sorted weights of all active kernels.
    """
    weights = [w for w in summary.get("kernel_weights", []) if isinstance(w, dict) and _finite(w.get("weight"))]
    weights.sort(key=lambda w: -w["weight"])
    nonzero = [w for w in weights if w["weight"] > 0]
    shown = nonzero[:top_k]
    rest = sum(w["weight"] for w in nonzero[top_k:])
    M = summary.get("n_kernels", len(weights))
    note = trivial_note(summary)
    if note is not None or not shown:
        fig = _figure()
        _note(fig, fig.add_subplot(), note or "no active kernels", summary)
        return _save(fig, path)
    groups: dict[str, list[float]] = {}
    for w in nonzero:
        groups.setdefault(_group(str(w.get("name", ""))), []).append(w["weight"])
    spread = len(nonzero) > len(shown)
    height = max(3.0, 0.3 * (len(shown) + 2) + 1.4)
    fig = _figure((13.0 if spread else 7.5, height))
    ax = fig.add_subplot(1, 2, 1) if spread else fig.add_subplot()
    labels = [str(w.get("name", w.get("index", "?"))) for w in shown]
    values = [w["weight"] for w in shown]
    y = list(range(len(values)))[::-1]
    bars = ax.barh(y, values, color="C0")
    ax.set_yticks(y, labels, fontsize=8)
    ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=2)
    ax.set_xlim(0, max(values) * 1.25)
    ax.set_xlabel("kernel weight d_m")
    others = len(nonzero) - len(shown)
    tail = f"; the other {others} hold {rest:.3g}" if others > 0 else ""
    ax.set_title(f"top {len(shown)} of {len(nonzero)} active kernels (M = {M}){tail}", fontsize=9)
    if spread:
        ax2 = fig.add_subplot(1, 2, 2)
        if 1 < len(groups) < len(nonzero):
            ranked = sorted(groups.items(), key=lambda g: -sum(g[1]))[:top_k]
            gy = list(range(len(ranked)))[::-1]
            gb = ax2.barh(gy, [sum(v) for _, v in ranked], color="C1")
            ax2.set_yticks(gy, [f"{g} ({len(v)})" for g, v in ranked], fontsize=8)
            ax2.bar_label(gb, fmt="%.3g", fontsize=7, padding=2)
            ax2.set_xlim(0, max(sum(v) for _, v in ranked) * 1.25)
            ax2.set_xlabel("total weight (number of active kernels)")
            ax2.set_title(f"weight per bank kernel, summed over features ({len(groups)} kernels)", fontsize=9)
        else:
            ranks = list(range(1, len(nonzero) + 1))
            ax2.plot(ranks, [w["weight"] for w in nonzero], color="C1")
            ax2.axvline(len(shown) + 0.5, color="gray", ls="--", lw=1, label=f"top {len(shown)}")
            ax2.set_xlabel("rank of the active kernel")
            ax2.set_ylabel("kernel weight d_m")
            ax2.set_title(f"all {len(nonzero)} active weights, sorted", fontsize=9)
            ax2.legend(loc="best")
            ax2.grid(True, alpha=0.3)
    _suptitle(fig, _title(summary))
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
