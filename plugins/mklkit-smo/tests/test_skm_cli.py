"""``mklkit run specs/skm.yaml`` end to end (in-process, through ``mklkit.cli.main``).

A reduced copy of the spec (``--set``: a quarter of wbc for training, six
kernels) so that the run and the independent checks take a few seconds: the
written ``summary.json`` must report a converged solve whose ``objective`` is
the primal of (P) at the written solution, bracketing the optimum of (D_K)
computed by cvxpy + Clarabel, and whose message states an (ε1, ε2)-optimality
(OPT3) that is recomputed here from the solution.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from mklkit.api import load_spec
from mklkit.cli import main

SPEC = Path(__file__).resolve().parents[3] / "specs" / "skm.yaml"
OVERRIDES = [
    "data.test_size=0.75",
    "kernels.bank.0.features.random_subsets=2",  # 2 subsets x 3 widths = 6 kernels
    "engine.tol=1e-4",
]


def _reported(message: str) -> tuple[float, float]:
    m = re.search(r"eps1/n = ([0-9.eE+-]+), eps2 = ([0-9.eE+-]+);", message)
    assert m, message
    return float(m.group(1)), float(m.group(2))


def _dk_optimum(K: np.ndarray, y: np.ndarray, C_paper: float) -> float:
    """min (D_K): 1/2 g^2 - e'a, 0 <= a <= C, y'a = 0, ||L_j' D(y) a|| <= g (cvxpy + Clarabel)."""
    import cvxpy as cp

    a = cp.Variable(y.size)
    g = cp.Variable()
    cons = [a >= 0, a <= C_paper, y @ a == 0]
    for Km in K:
        w, V = np.linalg.eigh(0.5 * (Km + Km.T))
        keep = w > 1e-10 * w.max()
        L = V[:, keep] * np.sqrt(w[keep])
        cons.append(cp.norm(L.T @ cp.multiply(y, a)) <= g)
    prob = cp.Problem(cp.Minimize(0.5 * cp.square(g) - cp.sum(a)), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert prob.status == "optimal", prob.status
    return float(prob.value)


def test_run_skm_spec_reports_the_primal_and_the_optimality_reached(tmp_path, capsys) -> None:
    out = tmp_path / "skm"
    argv = ["run", str(SPEC), "--out", str(out), "--quiet"]
    for o in OVERRIDES:
        argv += ["--set", o]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    assert stdout.startswith("status      converged")

    summary = json.loads((out / "summary.json").read_text())
    history = json.loads((out / "history.json").read_text())
    sol = np.load(out / "solution.npz")
    assert summary["status"] == "converged" and summary["converged"] is True
    assert summary["engine"] == "skm_smo" and summary["regularizer"] == "l1_squared"
    assert summary["n_kernels"] == 6

    # the same training problem the run solved (the split and the bank are deterministic)
    problem = load_spec(SPEC, OVERRIDES).prepare(progress=False).problem
    K, y, C = problem.K, problem.y, float(problem.C)
    assert C == summary["C"] == 1.0 and K.shape == (6, y.size, y.size)

    # objective = the primal of (P) at the written blocks alpha_m and bias
    act = sol["active"]
    A = sol["alpha"]
    Ka = np.einsum("mij,mj->mi", K[act], A)
    f = Ka.sum(axis=0) + float(sol["bias"])
    norms = np.sqrt(np.maximum(np.einsum("mi,mi->m", A, Ka), 0.0))
    P = float(np.sum(np.maximum(0.0, 1.0 - y * f)) + 0.5 * C * np.sum(norms) ** 2)
    assert summary["objective"] == pytest.approx(P, rel=1e-9)
    np.testing.assert_allclose(sol["block_norms"][act], norms, rtol=1e-7, atol=1e-12)

    # ... and it is the optimum: min (D_K) = -P* lies in the certified [dual, primal]
    ref = -C * _dk_optimum(K, y, 1.0 / C)
    assert summary["dual_objective"] <= summary["objective"]
    slack = 1e-7 * abs(ref)
    assert summary["dual_objective"] - slack <= ref <= summary["objective"] + slack
    assert summary["duality_gap"] <= 1e-4

    # (OPT3) at (alpha, eta) recomputed from the solution: alpha_m = eta_m D(y) alpha
    eta = np.asarray(sol["kernel_weights"], dtype=np.float64)  # sum_j d_j^2 eta_j = 1, d = 1
    assert eta.sum() == pytest.approx(1.0) and np.all(eta[act] > 0)
    gam = A[0] / eta[act[0]]  # D(y) alpha (paper scale, C_paper = 1/C)
    alpha = y * gam
    # the written weights are normalised to sum 1 (to rounding) after the blocks were formed,
    # so a variable at a bound comes back within rounding of it: put it back there
    U = 1.0 / C
    alpha[np.abs(alpha - U) <= 1e-12 * U] = U
    alpha[np.abs(alpha) <= 1e-12 * U] = 0.0
    gam = y * alpha
    assert np.all(alpha >= -1e-12) and np.all(alpha <= 1.0 / C + 1e-12)
    assert abs(float(np.sum(gam))) <= 1e-9
    v = np.einsum("mij,j->mi", K, gam)
    Jj = 0.5 * (v @ gam) - alpha.sum()
    e1 = float(Jj.max() - Jj[eta > 0].min())
    S = y - eta @ v
    up = np.where(y > 0, alpha < 1.0 / C, alpha > 0)
    low = np.where(y > 0, alpha > 0, alpha < 1.0 / C)
    e2 = 0.5 * float(S[up].max() - S[low].min())
    e1n_msg, e2_msg = _reported(summary["message"])
    n = y.size
    assert e1 / n == pytest.approx(e1n_msg, rel=1e-2, abs=1e-9)
    assert e2 == pytest.approx(e2_msg, rel=1e-2)
    assert e1 / n <= 5e-4 and e2 <= 1e-4 * (1 + 1e-9)
    last = history[-1]
    assert (last["eps1_per_n"], last["eps2"]) == pytest.approx((e1n_msg, e2_msg), rel=1e-2)
    assert "(eps1, eps2)-optimality (OPT3) reached" in summary["message"]


@pytest.mark.parametrize(
    "spec, overrides",
    [
        (
            "smomkl_uci.yaml",
            [
                "data.test_size=0.75",
                "kernels.preset=null",
                "kernels.bank=[{function: rbf, width: [1, 5]}]",
                "engine.max_iter=20",
            ],
        ),
        ("skm.yaml", [*OVERRIDES, "engine.max_iter=20"]),
    ],
    ids=["smo_mkl", "skm_smo"],
)
def test_not_converged_is_said_once(tmp_path, capsys, spec: str, overrides: list[str]) -> None:
    argv = ["run", str(SPEC.parent / spec), "--out", str(tmp_path / "out"), "--quiet"]
    for o in overrides:
        argv += ["--set", o]
    assert main(argv) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("warning: the solver did not converge: status max_iter")
    assert "max_iter=20 SMO steps reached" in lines[0]
