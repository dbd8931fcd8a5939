"""
Writing a loss plugin and checking it
=====================================

Every loss in mklkit is a small class: its value, derivatives and convex
conjugate as compiled kernels, and a few declarations of what it is (smooth,
its conjugate's domain). Once written and registered, the new loss is found by
name by the estimators, the specs and the command line, and every engine whose
requirements it meets solves with it.

This example writes the *smoothed hinge* loss, checks it with mklkit's
conformance kit (:mod:`mklkit.testing`), and fits it with two different engines,
which must agree. The kit catches the typical mistakes (a wrong derivative, a
conjugate off by a sign, a domain end in the wrong place) before an engine turns
them into a wrong model.
"""

# %%
# The mathematics first
# ---------------------
# With the margin :math:`t = yz` and a smoothing width :math:`\gamma > 0`,
#
# .. math::
#
#    \ell(y, z) = \begin{cases} 0 & t \ge 1 \\
#                 \frac{(1-t)^2}{2\gamma} & 1-\gamma < t < 1 \\
#                 1 - t - \frac\gamma2 & t \le 1-\gamma \end{cases},
#    \qquad \partial_z\ell = -y\,\min\big(1, \max(0, \tfrac{1-t}{\gamma})\big).
#
# It is the hinge with its kink rounded off by a parabola: differentiable, with
# a :math:`1/\gamma`-Lipschitz derivative. Its conjugate is
#
# .. math::
#
#    \ell^*(y, u) = uy + \tfrac\gamma2 u^2 \quad \text{on } -1 \le uy \le 0,
#    \qquad +\infty \text{ otherwise}.
#
# The gradient :math:`y + \gamma u` stays finite at the ends of the domain, so the
# loss is not ``smooth_conjugate`` in the contract's sense: it gives the
# constrained form :math:`\ell_0^*(y,u) = uy + \frac\gamma2u^2` under
# :math:`-1-uy \le 0` and :math:`uy \le 0` instead (no auxiliary variables).
#
# The class
# ---------
# Parameters are declared with :class:`~mklkit.Param`; every numeric method is a
# ``@kernel`` (a static method compiled by numba) of float64 arrays and the
# parameter vector ``params`` (here ``params[0]`` is ``gamma``).
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import train_test_split

from mklkit import CompilationWarning, MKLClassifier
from mklkit.components.base import CLASSIFICATION, Loss, Param, kernel
from mklkit.data import load_builtin
from mklkit.testing import check_component, check_parameter_points, registered


class SmoothHinge(Loss):
    """Smoothed hinge loss: the hinge with a parabola of width gamma at its kink."""

    name = "smooth_hinge"
    description = "hinge loss smoothed by a parabola of width gamma below margin 1 (classification)"
    task = CLASSIFICATION
    params = (
        Param("gamma", 1.0, "width of the quadratic part", low=0.0, low_open=True),
    )
    smooth_conjugate = False
    smooth_primal = True
    n_aux = 0
    n_cons = 2

    def deriv_lipschitz(self) -> float:
        return 1.0 / self.gamma

    @kernel
    def value(y, z, params):
        g = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            t = y[i] * z[i]
            if t >= 1.0:
                out[i] = 0.0
            elif t > 1.0 - g:
                out[i] = (1.0 - t) ** 2 / (2.0 * g)
            else:
                out[i] = 1.0 - t - 0.5 * g
        return out

    @kernel
    def deriv(y, z, params):
        g = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = -y[i] * min(1.0, max(0.0, (1.0 - y[i] * z[i]) / g))
        return out

    @kernel
    def deriv2(y, z, params):
        g = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            t = y[i] * z[i]
            out[i] = 1.0 / g if 1.0 - g < t < 1.0 else 0.0
        return out

    @kernel
    def conj(y, u, params):
        g = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            s = u[i] * y[i]
            out[i] = s + 0.5 * g * u[i] * u[i] if -1.0 <= s <= 0.0 else np.inf
        return out

    @kernel
    def conj_grad(y, u, params):
        return y + params[0] * u

    @kernel
    def conj_hess(y, u, params):
        return np.full(y.shape[0], params[0])

    @kernel
    def conj_lower(y, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = -1.0 if y[i] > 0.0 else 0.0
        return out

    @kernel
    def conj_upper(y, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = 0.0 if y[i] > 0.0 else 1.0
        return out

    # The constrained form: l0*(y, u) = uy + gamma u^2 / 2 under -1 - uy <= 0 and uy <= 0.
    @kernel
    def l0(y, u, ut, params):
        return u * y + 0.5 * params[0] * u * u

    @kernel
    def l0_grad(y, u, ut, params):
        out = np.empty((y.shape[0], 1))
        out[:, 0] = y + params[0] * u
        return out

    @kernel
    def l0_hess(y, u, ut, params):
        return np.full((y.shape[0], 1, 1), params[0])

    @kernel
    def cons(y, u, ut, params):
        out = np.empty((y.shape[0], 2))
        out[:, 0] = -1.0 - u * y
        out[:, 1] = u * y
        return out

    @kernel
    def cons_grad(y, u, ut, params):
        out = np.empty((y.shape[0], 2, 1))
        out[:, 0, 0] = -y
        out[:, 1, 0] = y
        return out

    @kernel
    def cons_hess(y, u, ut, params):
        return np.zeros((y.shape[0], 2, 1, 1))


print(SmoothHinge(gamma=0.5))

# %%
# The conformance kit
# -------------------
# :func:`~mklkit.testing.check_component` checks an instance against the loss
# contract at seeded random points: derivatives against central differences,
# convexity, the conjugate's domain and its supremum, the Fenchel–Young equality,
# the constrained form, the Lipschitz bound and more. Each identity is one line of
# the report.
report = check_component(SmoothHinge())
print(report)

# %%
# A bug that shows only away from the defaults needs other parameter values:
# :func:`~mklkit.testing.check_parameter_points` checks the class at its
# defaults and at random points drawn from its ``Param`` declarations.
for rep in check_parameter_points(SmoothHinge, n_random=3, seed=0):
    print(f"{rep.origin:35s} ok = {rep.ok}")

# %%
# The kit is there to catch mistakes. Here is the same loss with the derivative's
# sign flipped, a slip that is easy to make and silent in a fit (the model would
# simply be wrong):


class BrokenSmoothHinge(SmoothHinge):
    @kernel
    def deriv(y, z, params):
        g = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = y[i] * min(1.0, max(0.0, (1.0 - y[i] * z[i]) / g))
        return out


broken = check_component(BrokenSmoothHinge())
print(
    f"ok = {broken.ok}: {len(broken.failures)} of {len(broken.checks)} identities failed"
)
for failure in broken.failures:
    print(f"  {failure.identity}: {failure.detail}")

# %%
# Register it and fit it with two engines
# ---------------------------------------
# An installed plugin registers its classes from the hook
# ``mklkit_register_components`` of the module its ``mklkit`` entry point names
# (``mklkit new-plugin NAME`` writes such a distribution). Inside one process,
# :func:`mklkit.testing.registered` registers classes through the same hook for
# the length of a ``with`` block; the loss is then found by name like a built-in.
#
# Its declarations decide which engines take it: ``spicy`` solves it through the
# constrained form of its conjugate, ``proximal`` through its smooth primal. Both
# solve the same problem to a relative duality gap of :math:`10^{-6}`, so their
# models must agree. A regularization path (``fit_path``, warm-started from the
# largest C down) then gives the test accuracy over a range of C, for the new loss
# and for the built-in logistic loss.
ds = load_builtin("ionosphere")
X_tr, X_te, y_tr, y_te = train_test_split(
    ds.X, ds.y, test_size=0.3, random_state=0, stratify=ds.y
)
bank = [
    {"function": "rbf", "width": [1.5, 3.0, 6.0, 12.0]},
    {"function": "poly", "degree": [1, 2]},
]
loss = {"name": "smooth_hinge", "gamma": 0.5}
Cs = np.logspace(-3, 0, 7)

fits = {}
with registered(SmoothHinge), warnings.catch_warnings():
    # the first fit with a new loss compiles its kernels once (cached on disk afterwards)
    warnings.simplefilter("ignore", CompilationWarning)
    for engine in ("spicy", "proximal"):
        t0 = time.perf_counter()
        clf = MKLClassifier(bank, loss=loss, C=0.1, engine=engine, tol=1e-6).fit(
            X_tr, y_tr
        )
        fits[engine] = (clf, time.perf_counter() - t0)
    path = MKLClassifier(bank, loss=loss, engine="spicy").fit_path(X_tr, y_tr, Cs)
    path_accuracy = {
        "smooth_hinge": [path.estimator(i).score(X_te, y_te) for i in range(len(path))]
    }
logistic_path = MKLClassifier(bank, loss="logistic", engine="spicy").fit_path(
    X_tr, y_tr, Cs
)
path_accuracy["logistic"] = [
    logistic_path.estimator(i).score(X_te, y_te) for i in range(len(logistic_path))
]

for engine, (clf, seconds) in fits.items():
    print(
        f"smooth_hinge with {engine:8s}: test accuracy {clf.score(X_te, y_te):.4f}, {clf.result_.status}, "
        f"gap {clf.dual_gap_:.1e}, objective {clf.result_.objective:.6f}, {seconds:.2f} s"
    )
a, b = (fits[engine][0].decision_function(X_te) for engine in ("spicy", "proximal"))
print(
    f"largest difference of the two engines' decision values: {np.max(np.abs(a - b)):.1e} (values up to {np.max(np.abs(a)):.1f})"
)
print()
print(
    f"{'C':>8s}  {'smooth_hinge':>12s}  {'logistic':>8s}   (test accuracy along the paths)"
)
for i, C in enumerate(path.Cs):
    print(
        f"{C:8.3g}  {path_accuracy['smooth_hinge'][i]:12.4f}  {path_accuracy['logistic'][i]:8.4f}"
    )

# %%
# The loss, its derivative and its conjugate
# ------------------------------------------
# Engines call the kernels on whole arrays, and so can you. The panels draw the
# loss and its derivative against the margin :math:`t = yz` for two widths,
# beside the hinge and the logistic loss, and the conjugate on its domain
# :math:`-1 \le u \le 0` (for :math:`y = +1`). The smoothed hinge keeps the hinge's
# flat part (points beyond the margin contribute nothing) with a continuous,
# bounded slope; its conjugate is the hinge's, :math:`u`, plus the quadratic
# :math:`\frac\gamma2u^2`.
t = np.linspace(-2.0, 3.0, 501)
u = np.linspace(-1.0, 0.0, 201)
fig, (ax_l, ax_d, ax_c) = plt.subplots(1, 3, figsize=(12, 3.8), layout="constrained")
for gamma, style in ((0.5, "-"), (1.5, "--")):
    sh = SmoothHinge(gamma=gamma)
    label = f"smooth_hinge, gamma {gamma}"
    ax_l.plot(
        t,
        sh.jit.value(np.ones_like(t), t, sh.param_vector),
        style,
        color="C0",
        label=label,
    )
    ax_d.plot(
        t,
        sh.jit.deriv(np.ones_like(t), t, sh.param_vector),
        style,
        color="C0",
        label=label,
    )
    ax_c.plot(
        u,
        sh.jit.conj(np.ones_like(u), u, sh.param_vector),
        style,
        color="C0",
        label=label,
    )
ax_l.plot(t, np.maximum(0.0, 1.0 - t), color="C1", label="hinge")
ax_d.plot(t, np.where(t < 1.0, -1.0, 0.0), color="C1", label="hinge")
ax_c.plot(u, u, color="C1", label="hinge")
ax_l.plot(t, np.log1p(np.exp(-t)), color="C2", label="logistic")
ax_d.plot(t, -1.0 / (1.0 + np.exp(t)), color="C2", label="logistic")
ax_c.plot(
    u,
    (-u) * np.log(np.maximum(-u, 1e-300)) + (1 + u) * np.log(np.maximum(1 + u, 1e-300)),
    color="C2",
    label="logistic",
)
ax_l.set(xlabel="margin t = y z", ylabel="loss", title="Loss")
ax_d.set(xlabel="margin t = y z", ylabel="derivative in z (y = +1)", title="Derivative")
ax_c.set(xlabel="u (y = +1)", ylabel="conjugate", title="Conjugate on its domain")
for ax in (ax_l, ax_d, ax_c):
    ax.grid(True, alpha=0.3)
ax_l.legend(fontsize=8)

# %%
# Accuracy along the regularization path
# --------------------------------------
# The two losses scale differently, so one C means a different amount of
# regularization for each; the paths compare them at their best C rather than
# at one value. Where the curves lie close, the new loss is as good a choice as
# the logistic loss for these kernels; the printed table above gives the values.
fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
for name, acc in path_accuracy.items():
    ax.semilogx(path.Cs, 100 * np.array(acc), "o-", label=name)
ax.set_xlabel("C")
ax.set_ylabel("test accuracy (%)")
ax.set_title("Ionosphere, 6 kernels")
ax.grid(True, which="both", alpha=0.3)
ax.legend()

plt.show()
