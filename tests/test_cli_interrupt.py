"""Ctrl-C: every interrupted command ends with one line on stderr and exit code 130, keeping what is finished.

A KeyboardInterrupt raised while C code runs (numba loading a cached
function) may surface as ``SystemError: ... returned a result with an
exception set``, caused by the KeyboardInterrupt; the in-process tests raise
exactly that from the functions the commands call.  The subprocess tests send
SIGINT to a real ``mklkit run`` at several points.
"""

from __future__ import annotations

import ast
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import yaml

import mklkit.api
import mklkit.io
import mklkit.sweep
from mklkit.cli import EXIT_INTERRUPTED, main

SPECS = Path(__file__).resolve().parent.parent / "specs"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGINT and terminals as on POSIX")

TINY: dict[str, Any] = {
    "data": {"builtin": "sonar", "test_size": 0.25, "seed": 0, "standardize": True},
    "kernels": {"bank": [{"function": "rbf", "width": [1.0, 5.0]}, {"function": "linear"}], "normalize": "trace"},
    "problem": {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": 0.5}, "C": 0.5, "bias": True},
    "engine": {"name": "spicy", "tol": 1.0e-4, "max_iter": 100},
}


@pytest.fixture(autouse=True)
def sigint_as_on_a_terminal():
    """Every test starts with Python's own SIGINT handler, as a command typed at a terminal does: a
    suite started in the background (``cmd &`` in a script, ``nohup``) inherits SIGINT ignored, and
    ``mklkit`` rightly leaves an ignored SIGINT alone."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _default_sigint() -> None:
    """In the child before it runs: SIGINT back to its default (not the harness's inherited one)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def write_spec(tmp_path: Path, **extra: Any) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({**TINY, **extra}))
    return path


def interrupt_inside_c_code(*args: Any, **kwargs: Any) -> Any:
    """What a KeyboardInterrupt inside a numba dispatcher's C code becomes."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as exc:
        raise SystemError("CPUDispatcher(<function direction_forms>) returned a result with an exception set") from exc


def one_interrupt_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "interrupted" in lines[0], err
    return lines[0]


# ---------------------------------------------------------------------------
# in process
# ---------------------------------------------------------------------------
def test_run_interrupted_inside_numba_exits_130_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(mklkit.api, "solve_prepared", interrupt_inside_c_code)
    out = tmp_path / "out"
    code = main(["run", str(write_spec(tmp_path)), "--out", str(out), "--quiet"])
    line = one_interrupt_line(capsys.readouterr().err)
    assert code == EXIT_INTERRUPTED
    assert "nothing was written" in line and str(out) in line
    assert not (out / "summary.json").exists()


def sigint_lost_in_c_code() -> None:
    """This process gets SIGINT, and C code drops the KeyboardInterrupt for another error."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        pass
    raise SystemError("returned a result with an exception set")


def test_an_exception_after_sigint_is_an_interrupt_even_without_its_cause(tmp_path, capsys, monkeypatch):
    # the C code may also drop the KeyboardInterrupt and raise something else: the
    # SIGINT this process received still makes it an interrupt
    def lose_the_interrupt(*args: Any, **kwargs: Any) -> Any:
        sigint_lost_in_c_code()

    monkeypatch.setattr(mklkit.api, "solve_prepared", lose_the_interrupt)
    code = main(["run", str(write_spec(tmp_path)), "--out", str(tmp_path / "out"), "--quiet"])
    one_interrupt_line(capsys.readouterr().err)
    assert code == EXIT_INTERRUPTED
    # the handler is Python's own again after the command
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    # and the interrupt belonged to that command: progress reported after it goes on
    from mklkit.cli.output import IterationLines

    try:
        IterationLines(3, enabled=False)({"iteration": 1, "objective": 1.0, "gap": 0.1, "n_active": 3})
    except KeyboardInterrupt:
        pytest.fail("the finished command's SIGINT stopped code that ran after it")
    assert main(["validate", str(write_spec(tmp_path))]) == 0


def test_without_sigint_an_internal_error_still_shows_its_traceback(tmp_path, monkeypatch):
    def bug(*args: Any, **kwargs: Any) -> Any:
        raise SystemError("a bug")

    monkeypatch.setattr(mklkit.api, "solve_prepared", bug)
    with pytest.raises(SystemError, match="a bug"):
        main(["run", str(write_spec(tmp_path)), "--out", str(tmp_path / "out"), "--quiet"])


def test_sigint_while_writing_keeps_the_finished_run(tmp_path, capsys, monkeypatch):
    real = mklkit.api.RunResult.write

    def write_after_ctrl_c(self: Any, *args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(mklkit.api.RunResult, "write", write_after_ctrl_c)
    out = tmp_path / "out"
    code = main(["run", str(write_spec(tmp_path)), "--out", str(out), "--quiet"])
    line = one_interrupt_line(capsys.readouterr().err)
    assert code == EXIT_INTERRUPTED
    assert "written" in line and str(out) in line
    # the solve had finished: its run is written completely
    summary = mklkit.io.read_summary(out)
    assert summary["status"] == "converged"
    with np.load(out / mklkit.io.SOLUTION, allow_pickle=False) as solution:
        assert set(solution.files) >= {"alpha", "kernel_weights"}


@pytest.mark.parametrize("how", ["keyboard_interrupt", "system_error"])
def test_sweep_interrupted_says_what_was_kept_in_one_line(tmp_path, capsys, monkeypatch, how):
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        if how == "system_error":
            interrupt_inside_c_code()
        raise KeyboardInterrupt

    spec = write_spec(tmp_path, problem={**TINY["problem"], "C": [0.1, 1.0]}, cv={"folds": 2, "seed": 0})
    monkeypatch.setattr(mklkit.sweep, "run_sweep", interrupted)
    code = main(["sweep", str(spec), "--out", str(tmp_path / "o")])
    line = one_interrupt_line(capsys.readouterr().err)
    assert code == EXIT_INTERRUPTED
    assert "0 finished rows kept in" in line and "--resume" in line


def test_report_interrupted_exits_130_with_one_line(tmp_path, capsys, monkeypatch):
    import mklkit.report

    monkeypatch.setattr(mklkit.report, "plot_run", interrupt_inside_c_code)
    code = main(["report", str(tmp_path)])
    one_interrupt_line(capsys.readouterr().err)
    assert code == EXIT_INTERRUPTED


# ---------------------------------------------------------------------------
# a real process, interrupted at several points
# ---------------------------------------------------------------------------
def run_and_interrupt(
    argv: list[str], when: Callable[[str, float], bool], timeout: float = 120.0
) -> tuple[int, str, str]:
    """Run ``argv`` with stderr on a terminal (so the bank's progress bar shows), send SIGINT
    once ``when(stderr so far, seconds)`` holds; (exit code, stderr, stderr after the signal)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        cwd=SPECS.parent,
        preexec_fn=_default_sigint,
    )
    os.close(slave)
    buf, sent, t0 = b"", None, time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.02)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the other side is closed
                    chunk = b""
                if not chunk:
                    break
                buf += chunk
            if sent is None and when(buf.decode(errors="replace"), time.monotonic() - t0):
                proc.send_signal(signal.SIGINT)
                sent = len(buf)
            if time.monotonic() - t0 > timeout:
                proc.kill()
                pytest.fail(f"{argv} did not end: {buf.decode(errors='replace')}")
    finally:
        os.close(master)
    code = proc.wait()
    assert sent is not None, f"the process ended before the signal: {buf.decode(errors='replace')}"
    err = buf.decode(errors="replace").replace("\r\n", "\n")
    return code, err, buf[sent:].decode(errors="replace").replace("\r\n", "\n")


#: Written by the child once ``mklkit.cli`` is imported, before ``main`` runs.
CLI_IMPORTED = "test: mklkit.cli imported"


def _after(marker: str, delay: float) -> Callable[[str, float], bool]:
    """True from ``delay`` seconds after ``marker`` first appears on stderr."""
    seen: list[float] = []

    def point(err: str, t: float) -> bool:
        if marker in err and not seen:
            seen.append(t)
        return bool(seen) and t >= seen[0] + delay

    return point


POINTS = {
    # while the command imports what it runs and reads the spec: 0.2 s after the interpreter has
    # imported the CLI's module and entered main (a Ctrl-C before that, inside Python's own
    # start-up or the test's one-line script, is not the command's to report)
    "startup": lambda: _after(CLI_IMPORTED, 0.2),
    # once the bank is built (the progress bar's last line), while the test kernels are computed
    "bank": lambda: lambda err, t: "building kernel bank" in err and "189/189" in err,
    # during the solve (the first progress line)
    "solve": lambda: lambda err, t: "mklkit: iteration" in err,
}


@pytest.mark.parametrize("point", [pytest.param(p, marks=pytest.mark.slow) if p == "bank" else p for p in POINTS])
def test_mklkit_run_interrupted_exits_130_with_one_line(tmp_path, point):
    out = tmp_path / "out"
    argv = [
        sys.executable,
        "-c",
        "import sys; from mklkit.cli import main; "
        f"sys.stderr.write({CLI_IMPORTED!r} + '\\n'); sys.stderr.flush(); sys.exit(main())",
        # proximal gradient to a gap it cannot reach (round-off stops it near 1e-9): a solve that lasts
        "run",
        str(SPECS / "spicymkl_uci.yaml"),
        "--set",
        "engine.name=proximal",
        "--set",
        "engine.tol=1e-15",
        "--set",
        "engine.max_iter=100000000",
        "--out",
        str(out),
    ]
    code, err, after = run_and_interrupt(argv, POINTS[point]())
    assert code == EXIT_INTERRUPTED, err
    assert "Traceback" not in err and "Error" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(("mklkit: interrupted", "mklkit run: interrupted")), err
    assert sum("interrupted" in line for line in err.splitlines()) == 1, err
    # after the signal: at most a progress line already on its way, then the one line
    assert all(line.startswith("mklkit") for line in after.strip().splitlines()), after
    assert not (out / "summary.json").exists()


#: A Ctrl-C at the first import the command makes; every import tried after it is recorded.
_INTERRUPTED_IMPORT = """
import sys
from mklkit.cli import main


class InterruptFirstImport:
    def __init__(self):
        self.after = []

    def find_spec(self, name, path=None, target=None):
        if not self.after:
            self.after.append("<interrupted: " + name + ">")
            raise KeyboardInterrupt
        self.after.append(name)
        return None


finder = InterruptFirstImport()
sys.meta_path.insert(0, finder)
code = main(sys.argv[1:])
sys.meta_path.remove(finder)
print(repr(finder.after))
sys.exit(code)
"""


def test_the_interrupt_line_imports_nothing():
    # a Ctrl-C that cuts a first import short (a C extension's initialisation, such as _decimal's) must not be
    # followed by that import again: the extension would print a warning beside the one line
    argv = [sys.executable, "-c", _INTERRUPTED_IMPORT, "validate", str(SPECS / "quickstart.yaml")]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, preexec_fn=_default_sigint)
    assert proc.returncode == EXIT_INTERRUPTED, proc.stderr
    one_interrupt_line(proc.stderr)
    tried = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert tried[0].startswith("<interrupted") and tried[1:] == [], tried


#: An engine whose first iteration receives SIGINT inside code that swallows the KeyboardInterrupt,
#: as C code may (numba loading or compiling a function), then goes on iterating.
_SWALLOWING_ENGINE = """
import os, signal, sys, time
from mklkit.cli import main
from mklkit.engines.base import Engine
from mklkit.testing import registered


class Swallows(Engine):
    name = "swallows_sigint"
    description = "test engine: loses a SIGINT, then iterates"
    representations = ("array",)

    def _solve(self, problem, run, warm_start):
        zero = run.zero
        it = 0
        while True:
            it += 1
            if it == 1:
                try:
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(0.2)
                except BaseException:
                    pass
            run.offer(it, dual=zero.dual_objective, rho=zero.rho)
            run.record(it, zero.objective, zero.dual_objective)
            if run.check(it):
                return run.result(it)


with registered(Swallows):
    sys.exit(main(sys.argv[1:]))
"""


def test_a_sigint_lost_inside_other_code_still_stops_the_run(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _SWALLOWING_ENGINE,
            "run",
            str(SPECS / "quickstart.yaml"),
            "--set",
            "engine.name=swallows_sigint",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_default_sigint,
    )
    assert proc.returncode == EXIT_INTERRUPTED, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(("mklkit: interrupted", "mklkit run: interrupted"))
    assert "Traceback" not in proc.stderr
    assert not (out / "summary.json").exists()


_SLOW_POOL_SWEEP = """
import os, sys, time
from pathlib import Path

import mklkit.sweep.runner as runner
from mklkit.cli import main

marks = Path(sys.argv[1])


def slow(task):  # runs in a worker process: it says so, then works for a minute
    (marks / str(os.getpid())).write_text("")
    time.sleep(60)


runner.solve_task = slow
sys.exit(main(sys.argv[2:]))
"""


def test_an_interrupted_local_pool_stops_its_workers(tmp_path):
    # Ctrl-C on a terminal reaches the whole process group: the workers leave it to the
    # parent (no traceback of their own), which stops them instead of waiting for their tasks
    spec = write_spec(tmp_path, problem={**TINY["problem"], "C": [0.1, 1.0]}, cv={"folds": 2, "seed": 0})
    marks = tmp_path / "marks"
    marks.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _SLOW_POOL_SWEEP,
            str(marks),
            "sweep",
            str(spec),
            "--workers",
            "2",
            "--out",
            str(tmp_path / "o"),
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_default_sigint,
    )
    t0 = time.monotonic()
    while len(list(marks.iterdir())) < 2 and proc.poll() is None and time.monotonic() - t0 < 240:
        time.sleep(0.1)
    workers = [int(p.name) for p in marks.iterdir()]
    assert len(workers) == 2 and os.getpid() not in workers and proc.pid not in workers
    os.killpg(proc.pid, signal.SIGINT)
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 30  # the tasks' minute was not waited for
    assert proc.returncode == EXIT_INTERRUPTED, err
    line = one_interrupt_line(err)
    assert "0 finished rows kept in" in line and "--resume" in line
    t0 = time.monotonic()
    alive = workers
    while alive and time.monotonic() - t0 < 10:
        alive = [pid for pid in alive if _alive(pid)]
        time.sleep(0.05)
    assert not alive, alive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("how", ["cause", "sigint"])
def test_a_serial_sweep_stops_at_an_interrupt_inside_a_task(tmp_path, capsys, monkeypatch, how):
    # the interrupt surfaces from the task as another error: the sweep must stop there,
    # not record a failed task and go on with the next ones
    import mklkit.sweep.runner as runner_module

    real = runner_module.solve_task
    solved: list[int] = []

    def interrupted_in_task_1(task):
        if task.index == 1:
            if how == "cause":
                interrupt_inside_c_code()
            sigint_lost_in_c_code()
        solved.append(task.index)
        return real(task)

    spec = write_spec(tmp_path, problem={**TINY["problem"], "C": [0.1, 1.0]}, cv={"folds": 3, "seed": 0})
    monkeypatch.setattr(runner_module, "solve_task", interrupted_in_task_1)
    out = tmp_path / "o"
    code = main(["sweep", str(spec), "--out", str(out), "--quiet"])
    line = one_interrupt_line(capsys.readouterr().err)
    assert code == EXIT_INTERRUPTED
    assert "2 finished rows kept" in line
    assert solved == [0]  # tasks 2 and later were not started
    assert len(mklkit.sweep.read_results(out / mklkit.sweep.RESULTS)) == 2


# ---------------------------------------------------------------------------
# From Python: a Ctrl-C that comes back as another exception is a KeyboardInterrupt
# ---------------------------------------------------------------------------
def _system_error_from_interrupt(*args, **kwargs):
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise SystemError("CPUDispatcher(<function f>) returned a result with an exception set")


def _engine_raising(name: str, raise_error: Callable[[], Any]) -> type:
    """A third-party engine on the skeleton whose algorithm raises what ``raise_error`` raises."""
    from mklkit.engines.base import Engine

    class Raising(Engine):
        description = "test engine: its algorithm raises"

        def _solve(self, problem, run, warm_start):
            raise_error()

    Raising.name = name
    return Raising


def test_python_entry_points_raise_keyboard_interrupt():
    """``Engine.solve``, the estimators' ``fit`` and ``fit_path`` re-raise the numba SystemError that a
    Ctrl-C caused as a KeyboardInterrupt (chained to it); another SystemError stays what it is."""
    from sklearn.datasets import make_classification

    from mklkit.estimators import MKLClassifier
    from mklkit.testing import registered

    def plain():
        raise SystemError("something else")

    X, y = make_classification(40, 4, random_state=0)
    kernels = [{"function": "rbf", "width": 1.0}, {"function": "linear"}]
    with registered(
        _engine_raising("interrupted_in_c", _system_error_from_interrupt), _engine_raising("plain_system_error", plain)
    ):
        est = MKLClassifier(kernels, engine="interrupted_in_c")
        with pytest.raises(KeyboardInterrupt) as info:
            est.fit(X, y)
        assert isinstance(info.value.__cause__, SystemError)
        with pytest.raises(KeyboardInterrupt):
            est.fit_path(X, y, [0.1, 0.01])
        with pytest.raises(SystemError, match="something else"):
            MKLClassifier(kernels, engine="plain_system_error").fit(X, y)
    # Engine.solve itself, outside any estimator
    from mklkit.components.losses import Logistic
    from mklkit.components.elasticnet import L1
    from mklkit.problem import Problem

    G = X @ X.T
    pb = Problem(
        K=np.stack([G / np.trace(G), np.eye(len(y)) / len(y)]),
        y=2.0 * y - 1.0,
        loss=Logistic(),
        regularizer=L1(),
        C=1e-3,
    )
    with pytest.raises(KeyboardInterrupt) as info:
        _engine_raising("interrupted_in_c", _system_error_from_interrupt)().solve(pb)
    assert isinstance(info.value.__cause__, SystemError)
