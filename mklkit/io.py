"""Run directories: ``summary.json``, ``history.json``, ``solution.npz`` (``docs/specs.md``), and
``class_<k>/`` or ``pair_<i>_<j>/`` with a top-level ``summary.json`` for a multiclass run.

JSON is strict (non-finite floats as ``null``); files are written atomically, and existing run files
are overwritten only with ``force`` (which also removes the plots of an earlier ``mklkit report``).
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from .api import MulticlassRunResult, RunResult

SUMMARY = "summary.json"
HISTORY = "history.json"
SOLUTION = "solution.npz"
#: Files ``mklkit run`` writes; an existing one stops a run unless ``force``.
RUN_FILES: tuple[str, ...] = (SUMMARY, HISTORY, SOLUTION)
#: Plots of ``mklkit report``; a forced re-run removes them (they showed the old run).
REPORT_FILES: tuple[str, ...] = ("gap.png", "active.png", "weights.png")


class OutputError(ValueError):
    """An output directory that cannot be written, or a run directory that cannot be read: its ``path``,
    the ``problem`` and what would be ``allowed``."""

    def __init__(self, path: str | os.PathLike[str], problem: str, allowed: str = ""):
        self.path = str(path)
        self.problem = problem
        self.allowed = allowed
        tail = f"; allowed: {allowed}" if allowed else ""
        super().__init__(f"{self.path}: {problem}{tail}")


def to_jsonable(obj: Any) -> Any:
    """Plain JSON data: numpy scalars/arrays to Python, non-finite floats to None, Paths to str."""
    import numpy as np

    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if obj is None or isinstance(obj, (bool, str, int)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (np.bool_, np.integer, np.floating, np.ndarray)):
        return to_jsonable(obj.tolist())
    return str(obj)


def check_output_dir(
    out_dir: str | os.PathLike[str],
    force: bool = False,
    files: Sequence[str] = RUN_FILES,
    what: str = "the results of a run",
    allowed: str = "a new directory (--out DIR), or --force to overwrite",
) -> Path:
    """``out_dir`` as a Path, checked for writing (nothing is created); :class:`OutputError` when it is a file,
    or holds some of ``files`` (``what`` they are) and ``force`` is false."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OutputError(out, "exists and is not a directory", "a new or existing directory")
    existing = [name for name in files if (out / name).exists()] if out.is_dir() and not force else []
    if existing:
        raise OutputError(out, f"already holds {what} ({', '.join(existing)}); nothing was overwritten", allowed)
    return out


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write strict JSON (no NaN) atomically: a temporary file, then rename."""
    return write_text(path, json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n")


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 text atomically (a temporary file flushed to disk, then renamed); returns the path."""
    return atomic_write(Path(path), lambda tmp: write_synced(tmp, text))


def write_synced(path: str | os.PathLike[str], text: str, mode: str = "w") -> None:
    """Write (``mode="a"``: append) UTF-8 ``text`` to ``path`` in one write, flushed to disk."""
    with open(path, mode, encoding="utf-8", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def make_dir(out: Path) -> Path:
    """Create the directory ``out`` and its parents if missing; :class:`OutputError` when it cannot be created."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(out, f"cannot create the directory ({exc.strerror or exc})", "a writable path") from None
    return out


def atomic_write(path: Path, write: Callable[[str], None], suffix: str = "") -> Path:
    """Call ``write(tmp)`` on a new temporary file beside ``path``, then rename it (removed if writing fails).

    The file is created with ``os.open`` so that its mode follows the umask (``tempfile.mkstemp``'s
    0600 would stay with the result file).
    """
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}{suffix}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"{path.parent}: no free name for a temporary file .{path.name}.*{suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def write_run(run: RunResult, out_dir: str | os.PathLike[str], force: bool = False) -> dict[str, Path]:
    """Write ``summary.json``, ``history.json`` and ``solution.npz`` of a run into ``out_dir`` (created if
    missing): ``{"summary": path, "history": path, "solution": path}``.  Raises :class:`OutputError` as
    :func:`check_output_dir`, and when the directory cannot be created."""
    import numpy as np

    out = make_dir(check_output_dir(out_dir, force))
    if force:
        _remove(out, REPORT_FILES)
    res = run.result
    active = np.asarray(res.active_set, dtype=np.int64)
    sol_path = out / SOLUTION
    atomic_write(
        sol_path,
        lambda tmp: np.savez_compressed(
            tmp,
            alpha=np.ascontiguousarray(np.asarray(res.alpha)[active], dtype=np.float64),
            active=active,
            bias=np.float64(res.bias),
            kernel_names=np.array(run.kernel_names, dtype=str),
            kernel_weights=np.asarray(res.kernel_weights, dtype=np.float64),
            block_norms=np.asarray(res.block_norms, dtype=np.float64),
        ),
        suffix=".npz",
    )
    hist_path = write_json(out / HISTORY, run.history())
    summary = run.summary()
    summary["files"] = {"history": HISTORY, "solution": SOLUTION}
    sum_path = write_json(out / SUMMARY, summary)
    return {"summary": sum_path, "history": hist_path, "solution": sol_path}


def write_multiclass_run(
    run: MulticlassRunResult, out_dir: str | os.PathLike[str], force: bool = False
) -> dict[str, Path]:
    """Write a multiclass run: a run directory per problem (:meth:`MulticlassRunResult.problem_dir`), then
    the top-level ``summary.json``; ``{"summary": path, "class_0": folder, ...}``.  Raises
    :class:`OutputError` as :func:`write_run`, for ``out_dir`` or a problem's folder."""
    out = check_output_dir(out_dir, force)
    folders = {run.problem_dir(k): check_output_dir(out / run.problem_dir(k), force) for k in range(len(run.runs))}
    for sub, folder in zip(run.runs, folders.values()):
        write_run(sub, folder, force=force)
    if force:
        _remove(out, (*REPORT_FILES, HISTORY, SOLUTION))
    summary = run.summary()
    summary["files"] = {"problems": list(folders)}
    return {"summary": write_json(out / SUMMARY, summary), **folders}


def _remove(out: Path, names: Sequence[str]) -> None:
    for name in names:
        (out / name).unlink(missing_ok=True)


def _read_json(path: Path, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise OutputError(
            path, f"{what} is not valid JSON (line {exc.lineno}: {exc.msg})", "a file written by mklkit run"
        ) from None
    except OSError as exc:
        raise OutputError(path, f"cannot read {what} ({exc.strerror or exc})") from None


def read_summary(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``summary.json`` of a run directory; :class:`OutputError` when there is none or it is not valid JSON."""
    d = Path(run_dir)
    if not d.is_dir():
        raise OutputError(d, "no such run directory", "a directory written by 'mklkit run'")
    p = d / SUMMARY
    if not p.is_file():
        raise OutputError(d, f"has no {SUMMARY}; it is not a run directory", "a directory written by 'mklkit run'")
    data = _read_json(p, SUMMARY)
    if not isinstance(data, dict):
        raise OutputError(p, f"{SUMMARY} does not hold a JSON object", "a file written by mklkit run")
    return data


def read_history(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The per-iteration records (``history.json``, else ``summary["history"]``; may be empty)."""
    p = Path(run_dir) / HISTORY
    data = _read_json(p, HISTORY) if p.is_file() else read_summary(run_dir).get("history", [])
    if not isinstance(data, list):
        raise OutputError(p, f"{HISTORY} does not hold a JSON list", "a file written by mklkit run")
    return [r for r in data if isinstance(r, dict)]
