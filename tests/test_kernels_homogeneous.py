"""The homogeneous polynomial kernel <x,z>^p is poly with offset 0: its label and its exact monomial factors."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from mklkit.kernels import Poly, build_factor_bank, expand_bank


@pytest.mark.parametrize("p", [2, 3])
def test_homogeneous_poly_label_values_and_monomial_factors(p):
    rng = np.random.default_rng(p)
    X, Xn = rng.standard_normal((30, 5)), rng.standard_normal((4, 5))
    spec = expand_bank([{"function": "poly", "degree": p, "offset": 0}], 5)[0]
    assert spec.label == f"poly(degree={p},offset=0)[all]"
    np.testing.assert_allclose(Poly(degree=p, offset=0.0).gram(X, Xn), (X @ Xn.T) ** p, rtol=1e-13)
    fb = build_factor_bank([spec], X, normalize="none")
    assert fb.factor_map.methods == ["poly_map"] and fb.ranks.tolist() == [comb(5 + p - 1, p)]  # 15, 35
    np.testing.assert_allclose(fb.LT.T @ fb.LT, (X @ X.T) ** p, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(fb.factor_map.transform(Xn).T @ fb.LT, (Xn @ X.T) ** p, rtol=1e-10, atol=1e-10)
