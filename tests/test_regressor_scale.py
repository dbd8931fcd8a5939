"""MKLRegressor's defaults do not depend on the scale of the target (``standardize_y``)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVR

from mklkit.components.params import ParamError
from mklkit.estimators import MKLRegressor

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)  # raw targets: mean 152, std 77
    return train_test_split(X, y, test_size=0.3, random_state=0)


@pytest.fixture(scope="module")
def tuned_svr(diabetes):
    X_tr, X_te, y_tr, y_te = diabetes
    grid = {"svr__C": [10.0, 100.0, 1000.0], "svr__gamma": [0.01, 0.03, 0.1], "svr__epsilon": [1.0, 10.0]}
    return GridSearchCV(make_pipeline(StandardScaler(), SVR()), grid, cv=5).fit(X_tr, y_tr).score(X_te, y_te)


@pytest.mark.parametrize("loss", ["eps_insensitive", "squared"])
def test_raw_targets_reach_a_tuned_baseline(diabetes, tuned_svr, loss):
    X_tr, X_te, y_tr, y_te = diabetes
    reg = MKLRegressor(loss=loss).fit(X_tr, y_tr)
    r2 = reg.score(X_te, y_te)
    # on this split: a grid-searched SVR 0.375, MKLRegressor 0.388 (eps_insensitive) and 0.376 (squared)
    assert r2 >= tuned_svr - 0.02 and r2 >= 0.35, (r2, tuned_svr)
    assert reg.y_offset_ == pytest.approx(y_tr.mean()) and reg.y_scale_ == pytest.approx(y_tr.std())


def test_predictions_follow_the_target_scale(diabetes):
    X_tr, X_te, y_tr, _ = diabetes
    a = MKLRegressor(loss="eps_insensitive").fit(X_tr, y_tr)
    b = MKLRegressor(loss="eps_insensitive").fit(X_tr, 1e-3 * y_tr + 5.0)
    np.testing.assert_allclose(b.predict(X_te), 1e-3 * a.predict(X_te) + 5.0, rtol=1e-6)
    assert a.C_ == b.C_


def test_standardize_y_false_fits_the_targets_as_given(diabetes):
    X_tr, X_te, y_tr, _ = diabetes
    y = (y_tr - y_tr.mean()) / y_tr.std()
    off = MKLRegressor(standardize_y=False).fit(X_tr, y)
    on = MKLRegressor().fit(X_tr, y)
    assert (off.y_offset_, off.y_scale_) == (0.0, 1.0)
    np.testing.assert_allclose(off.predict(X_te), on.predict(X_te), rtol=1e-6, atol=1e-8)
    with pytest.raises(ParamError, match="standardize_y must be True or False; got 'yes'"):
        MKLRegressor(standardize_y="yes").fit(X_tr, y_tr)
