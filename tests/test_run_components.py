"""``mklkit run`` with ``engine.name: spicy`` for every loss x regularizer from YAML.

The losses include the two of the ``mklkit-huber`` example plugin, which
reach the engine only through the component contract.  Each run must
converge to its tolerance, write an objective equal to the primal
recomputed from the written solution, and agree with cvxpy + Clarabel on
the same problem (built from the same spec) to 1e-4 relative.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from mklkit.api import load_spec
from mklkit.cli import main
from mklkit.plugins import get_registry

try:
    from tests.conic_reference import solve_reference
except ImportError:  # pragma: no cover - rootdir layout
    from conic_reference import solve_reference

TOL = 1e-6
#: (at C = 0.05 Clarabel fails numerically on hinge x kl for this data)
C = 0.5
CLASSIFICATION = {"data": {"builtin": "sonar", "test_size": 0.6, "seed": 1, "standardize": True}}
REGRESSION = {
    "data": {"builtin": "liver", "target": "drinks", "drop": ["y"], "test_size": 0.7, "seed": 1, "standardize": True}
}
LOSSES = {
    "hinge": ({"name": "hinge"}, CLASSIFICATION),
    "logistic": ({"name": "logistic"}, CLASSIFICATION),
    "squared": ({"name": "squared"}, REGRESSION),
    "eps_insensitive": ({"name": "eps_insensitive", "eps": 0.3}, REGRESSION),
    "huber": ({"name": "huber", "delta": 1.0}, REGRESSION),
    "squared_hinge": ({"name": "squared_hinge"}, CLASSIFICATION),
}
REGULARIZERS = {
    "l1": {"name": "l1"},
    "elasticnet": {"name": "elasticnet", "lam": 0.5},
    "lq": {"name": "lq", "q": 1.5},
    "uniform": {"name": "uniform"},
    "kl": {"name": "kl", "d0": 1.0},
}
#: every loss and every regularizer at least once in the fast suite
FAST = [
    ("hinge", "l1"),
    ("logistic", "elasticnet"),
    ("squared", "lq"),
    ("eps_insensitive", "uniform"),
    ("huber", "kl"),
    ("squared_hinge", "l1"),
]
CASES = FAST + [
    pytest.param(lo, rg, marks=pytest.mark.slow) for lo in LOSSES for rg in REGULARIZERS if (lo, rg) not in FAST
]
IDS = [f"{a}-{b}" for a, b in FAST] + [f"{lo}-{rg}" for lo in LOSSES for rg in REGULARIZERS if (lo, rg) not in FAST]


def spec_for(loss: str, reg: str) -> dict:
    loss_spec, data = LOSSES[loss]
    return {
        **data,
        "kernels": {"bank": [{"function": "rbf", "width": [1.0, 4.0]}, {"function": "linear"}], "normalize": "trace"},
        "problem": {"loss": loss_spec, "regularizer": REGULARIZERS[reg], "C": C, "bias": True},
        "engine": {"name": "spicy", "tol": TOL, "max_iter": 200},
    }


@pytest.mark.parametrize("loss,reg", CASES, ids=IDS)
def test_spicy_runs_every_pair_from_yaml(tmp_path: Path, capsys, loss: str, reg: str) -> None:
    if loss in ("huber", "squared_hinge") and loss not in get_registry().names("loss"):
        pytest.skip("the mklkit-huber example plugin is not installed")
    spec = spec_for(loss, reg)
    path = tmp_path / "pair.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    code = main(["run", str(path), "--out", str(out), "--quiet"])
    _, err = capsys.readouterr()
    assert code == 0, err
    s = json.loads((out / "summary.json").read_text())
    assert s["engine"] == "spicy"
    assert s["status"] == "converged", s
    assert -1e-12 <= s["duality_gap"] <= TOL
    # the written objective is the primal at the written solution
    prob = load_spec(path).prepare().problem
    with np.load(out / "solution.npz") as z:
        act, alpha, b = z["active"], z["alpha"], float(z["bias"])
    K = prob.K[act]
    zpred = np.einsum("mij,mj->i", K, alpha) + b
    norms = np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", alpha, K, alpha), 0.0))
    lo, rg = prob.loss, prob.regularizer
    primal = (
        lo.jit.value(prob.y, zpred, lo.param_vector).sum()
        + rg.jit.value(np.ascontiguousarray(norms), prob.C, rg.param_vector).sum()
    )
    assert s["objective"] == pytest.approx(primal, rel=1e-9)
    # an independent solver on the same problem
    params = {k: v for k, v in {**LOSSES[loss][0], **REGULARIZERS[reg]}.items() if k != "name"}
    ref = solve_reference(prob.K, prob.y, loss, reg, prob.C, **params)
    assert s["objective"] == pytest.approx(ref.objective, rel=1e-4)
