"""
==============================
Regularization path from C_max
==============================

C sets how strongly the kernel machine is regularized, and with a sparse
regularizer it also sets how many kernels the model keeps. From
:math:`C_{max}` upward every kernel is off; below it kernels enter one
after another. :meth:`mklkit.MKLClassifier.fit_path` solves a whole grid of
C from :math:`C_{max}` down, building the kernel bank once and starting each
solve from the previous solution, and returns every fitted model.

This example draws the kernel weights and the held-out accuracy along the
path for the block 1-norm (``"l1"``), the elastic net and the uniform
combination, so that you can see which kernels a smaller C adds and where
accuracy stops improving.
"""

# %%
# Data and kernel bank
# --------------------
#
# Ionosphere (351 radar returns, 34 features) with the default ``"auto"``
# kernel bank: Gaussian and polynomial kernels on all features and three
# Gaussian kernels on every single feature (one linear kernel on the binary
# feature ``x0``, none on the constant feature ``x1``): 104 kernels.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import train_test_split

from mklkit import MKLClassifier
from mklkit.data import load_builtin

ds = load_builtin("ionosphere")
X_train, X_test, y_train, y_test = train_test_split(
    ds.X, ds.y, test_size=0.3, random_state=0, stratify=ds.y
)

# %%
# Paths for the sparse regularizers
# ---------------------------------
#
# An integer ``Cs`` asks for that many values of C, log-spaced from
# ``C_max`` down to ``1e-3 * C_max``. Each regularizer has its own
# :math:`C_{max}`: the elastic net (λ = 0.5) penalizes the block norms with
# half the weight of the block 1-norm, so its :math:`C_{max}` is twice as
# large. The path's ``summary()`` gives, per C, the number of active
# kernels, the iterations, the certified duality gap and the seconds.
n_Cs = 12
paths = {
    "l1": MKLClassifier(regularizer="l1").fit_path(X_train, y_train, n_Cs),
    "elastic net": MKLClassifier(regularizer="elasticnet").fit_path(
        X_train, y_train, n_Cs
    ),
}
for label, path in paths.items():
    print(f"{label}: C_max = {path.Cs[0]:.4g}, path solved in {path.time_s:.2f} s")
    print(path.summary())

# %%
# The uniform combination
# -----------------------
#
# ``regularizer="uniform"`` keeps every kernel at weight 1/M at every C, and
# it has no :math:`C_{max}` (``C_max_`` is infinite), so its path is given
# the elastic net's values of C explicitly.
uniform_Cs = paths["elastic net"].Cs
paths["uniform"] = MKLClassifier(regularizer="uniform").fit_path(
    X_train, y_train, uniform_Cs
)
print(f"uniform: path solved in {paths['uniform'].time_s:.2f} s")

# %%
# Every point of a path is a fitted estimator (``path.estimator(i)``), so the
# held-out accuracy along the path is one ``score`` per C.
accuracy = {
    label: np.array([path.estimator(i).score(X_test, y_test) for i in range(len(path))])
    for label, path in paths.items()
}
for label, path in paths.items():
    best = int(np.argmax(accuracy[label]))
    fraction = (
        "" if label == "uniform" else f" ({path.Cs[best] / path.Cs[0]:.3g} C_max)"
    )
    print(
        f"{label:12s} best test accuracy {accuracy[label][best]:.3f} at C = "
        f"{path.Cs[best]:.3g}{fraction} with {path.n_active[best]} active kernels"
    )

# %%
# Kernel weights along the path
# -----------------------------
#
# Each line is one kernel's weight as C decreases from :math:`C_{max}`
# (dashed line; the top axis gives C as a fraction of it). The six kernels with the largest weight anywhere on the
# path are coloured and named; all others are grey.
fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True, layout="constrained")
for ax, label in zip(axes, ["l1", "elastic net"]):
    path = paths[label]
    W = path.kernel_weights
    top = np.argsort(W.max(axis=0))[::-1][:6]
    ax.plot(path.Cs, np.delete(W, top, axis=1), color="0.75", linewidth=0.8)
    for m in top:
        ax.plot(path.Cs, W[:, m], marker=".", label=path.kernel_names[m])
    ax.axvline(path.Cs[0], color="k", linestyle="--", linewidth=1)
    ax.text(
        path.Cs[0],
        0.98,
        "$C_{max}$ ",
        transform=ax.get_xaxis_transform(),
        ha="right",
        va="top",
    )
    ax.set_xscale("log")
    ax.set_xlabel("C")
    C_max = path.Cs[0]
    top_axis = ax.secondary_xaxis(
        "top", functions=(lambda C, c=C_max: C / c, lambda f, c=C_max: f * c)
    )
    top_axis.set_xlabel("C / $C_{max}$")
    ax.set_title(f"{label}: kernel weights")
    ax.legend(fontsize=8, loc="upper left")
axes[0].set_ylabel("kernel weight $d_m$")
plt.show()

# %%
# Along the block 1-norm path only a handful of kernels ever become active,
# and their weights change as C shrinks; the elastic net admits many more
# kernels, and its weights flatten towards uniform as C gets small.
#
# Held-out accuracy and sparsity along the path
# ---------------------------------------------
#
# The top panel shows the test accuracy of every model on the paths, the
# bottom panel how many kernels each uses (the uniform combination always
# uses all of them).
fig, (ax_acc, ax_n) = plt.subplots(
    2, 1, figsize=(7, 6.5), sharex=True, layout="constrained"
)
styles = {"l1": "o-", "elastic net": "s-", "uniform": "^-"}
for label, path in paths.items():
    ax_acc.plot(path.Cs, accuracy[label], styles[label], label=label)
    ax_n.plot(path.Cs, path.n_active, styles[label], label=label)
for label in ["l1", "elastic net"]:
    for ax in (ax_acc, ax_n):
        ax.axvline(paths[label].Cs[0], color="0.5", linestyle=":", linewidth=1)
ax_acc.set_ylabel("test accuracy")
ax_acc.set_title("Held-out accuracy along the path")
ax_acc.legend()
ax_n.set_xscale("log")
ax_n.set_ylim(0, 1.08 * len(paths["uniform"].kernel_names))
ax_n.set_xlabel("C  (dotted: $C_{max}$ of l1 and of the elastic net)")
ax_n.set_ylabel("active kernels")
ax_n.legend(loc="center left")
plt.show()

# %%
# At :math:`C_{max}` the sparse models use no kernel and predict the
# majority class. Accuracy rises as kernels enter and then levels off:
# further down the path the models grow denser without a matching gain on
# the held-out points. To choose C automatically, leave the default
# ``C="auto"`` (below 2,500 training rows: 3-fold cross-validation of three
# values; above: a held-out path like this one) or pass ``C="path"``.
