"""
Certified optimality: the duality gap of every engine
=====================================================

Every mklkit engine reports a relative duality gap, :math:`(P - D)/|P|`, between
the primal objective of its best point and the dual objective of a feasible dual
point. By weak duality the true distance to the optimum is at most this gap, so a
solve that stops at ``tol`` is certified, whichever algorithm produced it.

This example solves one problem (logistic loss, block 1-norm, the default kernel
bank on Ionosphere, held as factors) with the engines that accept it, and plots
the gap each of them recorded at every iteration. It shows how to read the
per-iteration history of a :class:`~mklkit.SolveResult` and how a callback can act
on the certificate while the solve runs.
"""

# %%
# The problem
# -----------
# The kernels are those ``MKLClassifier()`` builds by default (Gaussian and
# polynomial kernels on all features, Gaussian kernels on each feature), held as
# factors :math:`K_m \approx L_m L_m^\top` computed to a relative residual trace of
# :math:`10^{-6}`. A factor bank is the one representation that ``spicy``,
# ``proximal``, ``bcd`` and ``apg`` all accept, so every engine below solves
# exactly the same problem.
import time

import matplotlib.pyplot as plt
import numpy as np

from mklkit.data import Standardizer, load_builtin
from mklkit.estimators import default_kernels
from mklkit.kernels.factorize import build_factor_bank
from mklkit.plugins import get_registry
from mklkit.problem import Problem

ds = load_builtin("ionosphere")
X = Standardizer().fit(ds.X).transform(ds.X)
bank = build_factor_bank(default_kernels(X.shape[1], X), X, tol=1e-6)
print(bank)

registry = get_registry()
problem = Problem(
    K=bank,
    y=ds.y,
    loss=registry.create("loss", "logistic"),
    regularizer=registry.create("regularizer", "l1"),
    C=0.2,
)

# %%
# Solve it with every engine that accepts it
# ------------------------------------------
# ``engine.supports(problem)`` returns ``None`` or the reason the engine declines
# the problem, so we can try every registered engine. Each result carries a
# ``history``: one record per outer iteration (or per gap check) with the
# ``iteration``, ``objective``, ``dual_objective``, ``gap``, ``n_active`` and
# ``time_s`` (seconds since the solve started), plus keys of the engine's own.
#
# Each engine first solves the problem once to a loose tolerance, so that the
# times below do not include loading its compiled code. ``auto`` comes last: it
# picks one of the others.
TOL = 1e-8
names = sorted(registry.names("engine"), key=lambda name: (name == "auto", name))
results, seconds = {}, {}
for name in names:
    engine = registry.create("engine", {"name": name, "tol": TOL})
    reason = engine.supports(problem)
    if reason is not None:
        print(f"{name:>9s}: declined ({reason.split(':')[0]})")
        continue
    registry.create("engine", {"name": name, "tol": 1e-2}).solve(problem)  # warm-up
    t0 = time.perf_counter()
    results[name] = engine.solve(problem)
    seconds[name] = time.perf_counter() - t0

print()
print(
    f"{'engine':>9s}  {'status':>9s}  {'gap':>9s}  {'iter':>5s}  {'time s':>6s}  {'objective':>14s}  active  solved by"
)
for name, r in results.items():
    print(
        f"{name:>9s}  {str(r.status):>9s}  {r.gap:9.2e}  {r.iterations:5d}  "
        f"{seconds[name]:6.2f}  {r.objective:14.8f}  {len(r.active_set):3d}/{bank.n_kernels}  {r.solved_by}"
    )
objectives = np.array([r.objective for r in results.values()])
print(
    f"\nlargest relative difference between the objectives: {np.ptp(objectives) / objectives.min():.1e}"
)
print(
    f"C_max = {next(iter(results.values())).C_max:.3f} (all kernels are off at C >= C_max)"
)

# %%
# The gap along the iterations
# ----------------------------
# Each engine counts iterations in its own unit (Newton steps for ``spicy``,
# working-set solves for ``bcd``, gradient steps for ``proximal`` and ``apg``,
# which check the gap every few steps), so the left panel uses a log scale for
# the iterations and the right one puts all engines on the same clock. The
# history keeps the values of each iterate, so a curve may rise for a while; the
# result returns the best primal and dual points seen, and the solve ends once
# their gap is below the dashed tolerance line.
#
# ``auto`` delegates (here to ``bcd``, the engine for factor banks), so its curve
# lies on that of its delegate.
styles = {"spicy": "o-", "proximal": "-", "bcd": "s-", "apg": "^-", "auto": "x--"}
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained", sharey=True)
for name, r in results.items():
    it = np.array([h["iteration"] for h in r.history])
    gap = np.maximum(
        np.array([h["gap"] for h in r.history]), 1e-16
    )  # a gap of 0 or -1e-16: round-off
    t = np.array([h["time_s"] for h in r.history])
    style = styles.get(name, ".-")
    axes[0].plot(it, gap, style, label=name, markersize=4)
    axes[1].plot(t, gap, style, label=name, markersize=4)
for ax in axes:
    ax.axhline(TOL, color="k", linestyle=":", linewidth=1, label=f"tol = {TOL:g}")
    ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3)
axes[0].set_xscale("log")
axes[0].set_xlabel("iteration (each engine's own unit)")
axes[1].set_xlabel("time since the solve started (s)")
axes[0].set_ylabel("relative duality gap (P - D) / |P|")
axes[0].set_title("Gap per iteration")
axes[1].set_title("Gap against time")
axes[1].legend(loc="upper right")

# %%
# All engines end at the same objective, to within the tolerance (the largest
# relative difference is printed above), as they must: each stops only when its
# own certificate proves it within ``tol`` of the optimum.
#
# Stopping on the certificate
# ---------------------------
# ``engine.solve(problem, callback=f)`` calls ``f(record)`` with every history
# record; a truthy return stops the solve with status ``stopped``. Here the slow
# first-order ``proximal`` engine stops as soon as its gap certifies the
# solution to :math:`10^{-3}`, a common accuracy for model selection.
checked = []


def good_enough(record):
    checked.append(record["gap"])
    return record["gap"] <= 1e-3


early = registry.create("engine", {"name": "proximal", "tol": TOL}).solve(
    problem, callback=good_enough
)
print(early.message)
print(
    f"{len(checked)} gap checks, objective {early.objective:.8f} (optimum {results['spicy'].objective:.8f})"
)

plt.show()
