"""
==================================================
Precomputed kernels in scikit-learn's GridSearchCV
==================================================

Kernels are often computed outside the learner: string kernels on
sequences, graph kernels on molecules, similarity matrices from another
tool, or Gram matrices you wrote yourself. ``MKLClassifier("precomputed")``
learns a weighting of such Gram matrices, and because it declares itself a
*pairwise* estimator, scikit-learn's model selection tools
(``GridSearchCV``, ``cross_val_score``) cut the matrices along both sample
axes for every fold, exactly as for ``SVC(kernel="precomputed")``.

This example builds five string kernels on DNA sequences with plain numpy,
passes them to ``GridSearchCV`` to choose C, plots the cross-validated
score against C and scores the best model on held-out sequences.
"""

# %%
# Kernels computed outside mklkit
# -------------------------------
#
# The ``splice`` data set holds DNA sequences of 60 bases (coded A=1, C=2,
# G=3, T=4) around a candidate splice junction. Two kinds of kernel are
# computed here as inner products of explicit feature vectors:
#
# * *spectrum* kernels count the k-mers (substrings of length k) two
#   sequences share, wherever they occur (composition);
# * *positional* kernels count the positions at which two sequences carry
#   the same base, within one region (upstream, around the junction,
#   downstream).
import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, train_test_split

from mklkit import MKLClassifier
from mklkit.data import load_builtin

ds = load_builtin("splice")
bases = ds.X.astype(int) - 1  # 0..3


def spectrum_features(seqs, k):
    """Counts of each of the 4**k k-mers in every sequence."""
    n, length = seqs.shape
    kmer = np.zeros((n, length - k + 1), dtype=int)
    for j in range(k):
        kmer = 4 * kmer + seqs[:, j : length - k + 1 + j]
    counts = np.zeros((n, 4**k))
    np.add.at(counts, (np.repeat(np.arange(n), kmer.shape[1]), kmer.ravel()), 1)
    return counts


def positional_features(seqs, columns):
    """One-hot code of the bases at the given positions."""
    return np.eye(4)[seqs[:, columns]].reshape(len(seqs), -1)


features = {
    "spectrum k=2": spectrum_features(bases, 2),
    "spectrum k=3": spectrum_features(bases, 3),
    "positions -30..-6": positional_features(bases, range(0, 25)),
    "positions -5..+5": positional_features(bases, range(25, 35)),
    "positions +6..+30": positional_features(bases, range(35, 60)),
}
kernel_names = list(features)

# %%
# Pass the Gram matrices with the kernels on the last axis
# --------------------------------------------------------
#
# For ``fit``, ``G_train[i, j, m]`` is kernel ``m`` between training
# sequences ``i`` and ``j``: shape (N, N, M), e.g. ``np.stack(Ks, axis=-1)``.
# For ``predict`` and ``score``, ``G_test[i, j, m]`` is kernel ``m`` between
# test sequence ``i`` and training sequence ``j``: shape (N_test, N, M).
#
# The kernels have very different scales (a k-mer count against a count of
# matching positions), so ``normalize="trace"`` divides each one by its
# trace on the training rows; inside a cross-validation that is the trace
# of each fold's training part, applied to its validation rows too.
idx_train, idx_test = train_test_split(
    np.arange(ds.y.size), train_size=400, test_size=600, random_state=0, stratify=ds.y
)
y_train, y_test = ds.y[idx_train], ds.y[idx_test]
G_train = np.stack([F[idx_train] @ F[idx_train].T for F in features.values()], axis=-1)
G_test = np.stack([F[idx_test] @ F[idx_train].T for F in features.values()], axis=-1)
print(f"G_train {G_train.shape}, G_test {G_test.shape}")
print("traces on the training rows:", np.einsum("iim->m", G_train))

# %%
# Grid search over C and the elastic net's λ
# ------------------------------------------
#
# ``GridSearchCV`` needs nothing special: it indexes ``G_train`` by the
# fold's rows *and* columns for fitting, and by the validation rows and the
# fitting columns for scoring. A parameter of a component is reached with
# ``__``: ``regularizer__lam`` is the elastic net's λ (0 is the block
# 1-norm, 1 the uniform combination; the default is 0.5). The grid tries a
# λ near each end.
Cs = np.logspace(-3, -0.5, 5)
lams = [0.1, 0.9]
search = GridSearchCV(
    MKLClassifier("precomputed", normalize="trace"),
    {"C": Cs, "regularizer__lam": lams},
    cv=3,
).fit(G_train, y_train)

best = search.best_estimator_
res = search.cv_results_
mean_acc = res["mean_test_score"].reshape(
    len(Cs), len(lams)
)  # the grid's order: C, then λ
std_acc = res["std_test_score"].reshape(len(Cs), len(lams))
print(f"cross-validated accuracy (mean over {search.n_splits_} folds)")
print("       C  " + "  ".join(f"lam = {lam:<4}" for lam in lams))
for C, row in zip(Cs, mean_acc):
    print(f"{C:8.4f}  " + "  ".join(f"{acc:10.3f}" for acc in row))
print(f"mean fit time {res['mean_fit_time'].mean():.3f} s per fit")
best_C, best_lam = search.best_params_["C"], search.best_params_["regularizer__lam"]
print(
    f"best: C = {best_C:.4g}, lam = {best_lam}, cross-validated accuracy {search.best_score_:.3f}"
)
test_acc = search.score(G_test, y_test)
print(f"test accuracy of the refitted best model {test_acc:.3f}")
print(f"C_max of the best model on all training rows: {best.C_max_:.3g}")

# %%
# Plot the grid and the best model's weights
# ------------------------------------------
#
# The left panel shows the cross-validated accuracy against C for each λ
# (mean, and one standard deviation over the folds as a band), with the
# chosen point circled and the refitted model's test accuracy as a star.
# The right panel shows how the best model weights the five kernels.
fig, (ax_cv, ax_w) = plt.subplots(
    1, 2, figsize=(10, 4.2), width_ratios=[1.2, 1], layout="constrained"
)
for k, lam in enumerate(lams):
    ax_cv.plot(Cs, mean_acc[:, k], "o-", color=f"C{k}", label=f"CV, λ = {lam}")
    ax_cv.fill_between(
        Cs,
        mean_acc[:, k] - std_acc[:, k],
        mean_acc[:, k] + std_acc[:, k],
        color=f"C{k}",
        alpha=0.12,
    )
ax_cv.plot(best_C, search.best_score_, "o", ms=14, mfc="none", mec="k", label="best CV")
ax_cv.plot(best_C, test_acc, "*", color="tab:red", ms=13, label="test, best model")
ax_cv.set_xscale("log")
ax_cv.set_xlabel("C")
ax_cv.set_ylabel("accuracy")
ax_cv.set_title("Grid search over C and λ")
ax_cv.legend(loc="lower left")

ax_w.barh(kernel_names[::-1], best.kernel_weights_[::-1], color="tab:blue")
ax_w.set_xlabel("kernel weight $d_m$")
ax_w.set_title(f"Best model's weights (C = {best_C:.3g}, λ = {best_lam})")
plt.show()

# %%
# The cross-validated accuracy changes little over the small values of C
# and falls at the largest ones, where the penalty is strong enough to
# underfit; how soon it falls depends on λ. Where neighbouring grid points
# differ by less than the bands' width, the folds cannot tell them apart,
# and the refitted model's test accuracy (the star) is the better guide to
# what to expect on new data. The same ``G_train`` works with
# ``cross_val_score`` and in a ``Pipeline``; new sequences need only their
# kernels against the training sequences.
for name, weight in zip(kernel_names, best.kernel_weights_):
    print(f"{name:18s} weight {weight:.3f}")
