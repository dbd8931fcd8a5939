"""
=========================
Sparsity against accuracy
=========================

The regularizer decides how many kernels of the bank the model keeps. A
model on a few kernels is cheaper to evaluate (only the kernels with a
non-zero weight are computed at prediction time) and easier to read, but it
may give up accuracy. This example fits the same kernel bank with four
regularizers and puts the number of kernels each model uses beside its test
accuracy:

* ``"l1"``, the block 1-norm: sparse, few kernels;
* ``"elasticnet"`` (the default, λ = 0.5): sparse at large C, dense at small C;
* ``{"name": "lq", "q": 1.2}``, the block :math:`\\ell_q`-norm: never sparse,
  but the closer q is to 1, the more unequal its weights (``q = 2`` is the
  uniform combination);
* ``"uniform"``: every kernel at the same weight, the baseline.
"""

# %%
# Fit the four regularizers on several splits
# -------------------------------------------
#
# Ionosphere with the default ``"auto"`` kernel bank, on four random 50/50
# splits. C is left at ``"auto"``, so each fit chooses its own C by 3-fold
# cross-validation. For every model the script records the number of kernels
# with a non-zero weight, the *effective* number of kernels
# :math:`1/\sum_m d_m^2` (equal to M for uniform weights, 1 when one kernel
# takes all the weight), the test accuracy and the fit time.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import train_test_split

from mklkit import MKLClassifier
from mklkit.data import load_builtin

ds = load_builtin("ionosphere")
regularizers = {
    "l1": "l1",
    "elastic net": "elasticnet",
    "lq (q = 1.2)": {"name": "lq", "q": 1.2},
    "uniform": "uniform",
}
n_splits = 4
records = {label: [] for label in regularizers}
for seed in range(n_splits):
    X_tr, X_te, y_tr, y_te = train_test_split(
        ds.X, ds.y, test_size=0.5, random_state=seed, stratify=ds.y
    )
    for label, reg in regularizers.items():
        t0 = time.perf_counter()
        clf = MKLClassifier(regularizer=reg).fit(X_tr, y_tr)
        fit_s = time.perf_counter() - t0
        d = clf.kernel_weights_
        records[label].append(
            (np.count_nonzero(d), 1 / np.sum(d**2), clf.score(X_te, y_te), fit_s)
        )
records = {label: np.array(rows) for label, rows in records.items()}
n_kernels = d.size

print(f"{n_kernels} kernels in the bank; means over {n_splits} splits:")
print(
    f"{'regularizer':>14}  {'in use':>6}  {'effective':>9}  {'test accuracy':>15}  {'minus uniform':>15}  {'fit s':>5}"
)
for label, R in records.items():
    diff = R[:, 2] - records["uniform"][:, 2]  # paired: the same split
    print(
        f"{label:>14}  {R[:, 0].mean():6.1f}  {R[:, 1].mean():9.1f}  "
        f"{R[:, 2].mean():7.3f} +- {R[:, 2].std():.3f}  "
        f"{diff.mean():+7.3f} +- {diff.std():.3f}  {R[:, 3].mean():5.2f}"
    )


# %%
# Plot kernels in use against accuracy
# ------------------------------------
#
# Small markers are single splits, large markers the means with one standard
# deviation of the accuracy. The left panel counts the kernels with a
# non-zero weight, the right panel the effective number of kernels (on a
# logarithmic axis), which separates the non-sparse ``lq`` from the uniform
# combination.
fig, axes = plt.subplots(1, 2, figsize=(10, 4.5), sharey=True, layout="constrained")
markers = dict(zip(regularizers, ["o", "s", "D", "^"]))
for ax, column, xlabel in zip(
    axes, [0, 1], ["kernels with non-zero weight", "effective number of kernels"]
):
    for k, (label, R) in enumerate(records.items()):
        color = f"C{k}"
        ax.plot(R[:, column], R[:, 2], markers[label], color=color, alpha=0.35, ms=5)
        ax.errorbar(
            R[:, column].mean(),
            R[:, 2].mean(),
            yerr=R[:, 2].std(),
            fmt=markers[label],
            color=color,
            ms=10,
            capsize=4,
            label=label,
        )
    ax.axvline(n_kernels, color="0.6", linestyle=":", linewidth=1)
    ax.set_xlabel(xlabel)
axes[0].set_xlim(0, 1.1 * n_kernels)
axes[1].set_xscale("log")
axes[0].set_ylabel("test accuracy")
axes[0].set_title("Kernels in use")
axes[1].set_title("Effective number of kernels")
axes[0].legend(loc="upper center")
plt.show()

# %%
# The dotted line marks the size of the bank. The elastic net at the small
# C chosen here, ``lq`` and the uniform combination keep all or nearly all
# kernels, while ``"l1"`` keeps a small fraction of them; ``lq`` uses every
# kernel but concentrates the weight on fewer of them, as its effective
# number shows.
#
# Accuracy differences between regularizers are best read on the same
# splits: the column "minus uniform" above is each model's accuracy minus
# the uniform model's on the same split. When its mean is within about one
# standard deviation of zero, the splits cannot tell the two models apart,
# and a sparse model is then the better buy: it computes only its few
# kernels at prediction time and says which ones matter. The regularization
# path example shows how the number of kernels grows as C decreases.
