"""
===========
Quick start
===========

This example fits :class:`mklkit.MKLClassifier` with its defaults on a
bundled data set, scores it on held-out points and shows the kernel weights
it learned. The weights say which kernels, and so which features and which
kernel widths, the model relies on.

Learned weights are only worth having if they beat the plain average of the
same kernels, so the example also fits that baseline
(``regularizer="uniform"``) and compares the two test accuracies.
"""

# %%
# Load the data and split it
# --------------------------
#
# The Pima Indians diabetes data (768 patients, 8 measurements) ship with
# mklkit. :func:`mklkit.data.load_builtin` returns a ``Dataset`` whose labels
# are +1 (tested positive) and -1.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import train_test_split

from mklkit import MKLClassifier
from mklkit.data import load_builtin

ds = load_builtin("pima")
X_train, X_test, y_train, y_test = train_test_split(
    ds.X, ds.y, test_size=0.3, random_state=0, stratify=ds.y
)
print(f"{ds.name}: {ds.X.shape[0]} samples, {ds.X.shape[1]} features")
print(f"train {X_train.shape[0]}, test {X_test.shape[0]}")

# %%
# Fit with the defaults
# ---------------------
#
# ``MKLClassifier()`` standardizes the features, builds its ``"auto"`` kernel
# bank (Gaussian and polynomial kernels on all features, and three Gaussian
# kernels on every single feature), chooses C by 3-fold cross-validation and
# solves the logistic loss with the elastic-net regularizer. The solver
# reports a duality gap that certifies the solution.
t0 = time.perf_counter()
clf = MKLClassifier().fit(X_train, y_train)
fit_s = time.perf_counter() - t0
acc_mkl = clf.score(X_test, y_test)

print(f"kernels in the bank: {len(clf.kernel_names_)}")
print(f"kernels with non-zero weight: {np.count_nonzero(clf.kernel_weights_)}")
print(f"C = {clf.C_:.4g}  (C_max = {clf.C_max_:.4g})")
print(f"status: {clf.result_.status}, relative duality gap {clf.dual_gap_:.1e}")
print(f"fit time {fit_s:.2f} s, test accuracy {acc_mkl:.3f}")

# %%
# Kernel labels name single-feature kernels by column index (``[x0]`` is the
# first column). The data set's column names are:
for j, name in enumerate(ds.feature_names):
    print(f"x{j} = {name}", end="   " if j % 4 != 3 else "\n")

# %%
# The uniform-weight baseline
# ---------------------------
#
# The same bank with ``regularizer="uniform"`` gives every kernel the same
# weight: an SVM-like model on the average kernel.
t0 = time.perf_counter()
uniform = MKLClassifier(regularizer="uniform").fit(X_train, y_train)
fit_u = time.perf_counter() - t0
acc_uniform = uniform.score(X_test, y_test)
print(f"uniform weights: fit time {fit_u:.2f} s, test accuracy {acc_uniform:.3f}")

# %%
# Plot the weights
# ----------------
#
# The left panel shows the learned weight of every kernel with a non-zero
# weight, largest first; the dashed line is the weight each kernel gets in
# the uniform baseline (1 / number of kernels). Kernels above the line count
# more than in the plain average, kernels below it less. The right panel
# compares the two models' test accuracy.
weights = clf.kernel_weights_
active = np.flatnonzero(weights)
order = active[np.argsort(weights[active])]  # smallest at the bottom
names = [clf.kernel_names_[i] for i in order]

fig, (ax_w, ax_a) = plt.subplots(
    1, 2, figsize=(9, 7.5), width_ratios=[3, 1], layout="constrained"
)
ax_w.barh(np.arange(order.size), weights[order], color="tab:blue")
ax_w.axvline(
    1 / weights.size, color="k", linestyle="--", label=f"uniform (1/{weights.size})"
)
ax_w.set_yticks(np.arange(order.size), names, fontsize=8)
ax_w.set_ylim(-0.6, order.size - 0.4)
ax_w.set_xlabel("kernel weight $d_m$")
ax_w.set_title("Learned kernel weights")
ax_w.legend(loc="lower right")

bars = ax_a.bar(
    ["learned", "uniform"], [acc_mkl, acc_uniform], color=["tab:blue", "tab:gray"]
)
ax_a.bar_label(bars, fmt="%.3f")
ax_a.set_ylim(0.5, 1.0)
ax_a.set_ylabel("test accuracy")
ax_a.set_title("Held-out accuracy")
plt.show()

# %%
# The five kernels with the largest weights:
for i in np.argsort(weights)[::-1][:5]:
    print(f"{clf.kernel_names_[i]:24s} {weights[i]:.4f}")

# %%
# How large a difference matters? With n test points, the standard error of
# an accuracy a is about :math:`\sqrt{a(1-a)/n}`:
se = np.sqrt(acc_mkl * (1 - acc_mkl) / y_test.size)
print(
    f"learned - uniform = {acc_mkl - acc_uniform:+.3f}; standard error of one accuracy {se:.3f}"
)

# %%
# On a few hundred test points a difference smaller than the standard error
# is noise. At the small C that cross-validation picks on a data set of this
# size, the elastic net keeps most kernels with weights of the same order as
# the uniform ones, so the two models tend to be close; larger values of C
# give sparser weights (see the regularization path example). The weights
# still rank the kernels: a kernel well below the dashed line contributes
# little to the decision function.
