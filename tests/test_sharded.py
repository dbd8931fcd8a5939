"""Kernel-sharded solves: a ShardedBank on a LocalCluster of two worker processes."""

from __future__ import annotations

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from mklkit.components.losses import Hinge, Logistic  # noqa: E402
from mklkit.components.elasticnet import ElasticNet, L1  # noqa: E402
from mklkit.engines import common  # noqa: E402
from mklkit.engines.proximal import Proximal  # noqa: E402
from mklkit.engines.spicy import Spicy  # noqa: E402
from mklkit.kernels import BankError, KernelBank  # noqa: E402
from mklkit.kernels.ops import ArrayBank, BankAccessError  # noqa: E402
from mklkit.kernels.sharded import ShardedBank, ShardLostError  # noqa: E402
from mklkit.problem import Problem  # noqa: E402

ENTRIES = [
    {"function": "rbf", "width": "chi2", "features": {"random_subsets": 14, "size": 3, "seed": 1}},
    {"function": "poly", "degree": [1, 2], "features": [[0, 1], [2, 3], [4, 5]]},
]
M = 20


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((70, 6))
    y = np.where(X[:, 0] - X[:, 2] + 0.5 * rng.standard_normal(70) > 0, 1.0, -1.0)
    return X, y


@pytest.fixture(scope="module")
def local(data):
    return KernelBank.build(data[0], ENTRIES)


@pytest.fixture(scope="module")
def sharded(client, data):
    bank = ShardedBank.build(client, data[0], ENTRIES)
    yield bank
    bank.close()


def test_each_worker_holds_only_its_shard(sharded, local, client):
    info = sharded.shard_info()
    assert sharded.shape == (M, 70, 70) == local.K.shape
    assert len(info) == 2
    assert len({i["pid"] for i in info}) == 2  # two worker processes
    assert sorted(i["worker"] for i in info) == sorted(client.scheduler_info()["workers"])
    assert [i["lo"] for i in info] == [0, 10]
    assert [i["n_kernels"] for i in info] == [10, 10]
    assert all(i["nbytes"] == 10 * 70 * 70 * 8 for i in info)
    # the same kernels (chi2 widths, random subsets) as the whole description gives
    np.testing.assert_array_equal(sharded.gather(), local.K)
    assert sharded.names == local.names


def test_operations_match_the_array_bank(sharded, local):
    rng = np.random.default_rng(1)
    ref = ArrayBank(local.K)
    N = 70
    v, w, d = rng.standard_normal(N), rng.standard_normal(N), rng.standard_normal(N)
    np.testing.assert_allclose(sharded.trace(), ref.trace(), rtol=1e-14)
    np.testing.assert_allclose(sharded.matvecs(v), ref.matvecs(v), rtol=1e-12, atol=1e-15)
    for a, b in zip(sharded.matvecs_and_norms(v, w), ref.matvecs_and_norms(v, w)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    KR = ref.matvecs(v)
    for a, b in zip(sharded.direction_forms(d, KR), ref.direction_forms(d, KR)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    idx = np.array([2, 9, 10, 17], dtype=np.int64)
    s, t = rng.random(4), rng.random(4)
    H1, H2 = np.eye(N), np.eye(N)
    sharded.accumulate_hessian(H1, idx, s, np.ascontiguousarray(KR[idx]), t, 8)
    ref.accumulate_hessian(H2, idx, s, np.ascontiguousarray(KR[idx]), t, 8)
    np.testing.assert_allclose(H1, H2, rtol=1e-12, atol=1e-15)
    A = rng.standard_normal((4, N))
    np.testing.assert_allclose(sharded.matvecs_rows(A, idx), ref.matvecs_rows(A, idx), rtol=1e-12)
    alpha = np.zeros((M, N))
    alpha[idx] = A
    np.testing.assert_allclose(sharded.block_norms(alpha), ref.block_norms(alpha), rtol=1e-12)
    np.testing.assert_allclose(sharded.dual_block_norms(v), ref.dual_block_norms(v), rtol=1e-12)
    np.testing.assert_allclose(common.predict(sharded, alpha, 0.5), common.predict(local.K, alpha, 0.5), rtol=1e-12)


CASES = {
    "one_step-logistic-elasticnet": (Logistic, lambda: ElasticNet(lam=0.5), "one_step"),
    "iterative-hinge-l1": (Hinge, L1, "iterative"),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_spicy_same_solution_as_in_memory(case, sharded, local, data):
    loss, reg, method = CASES[case]
    y = data[1]
    p_mem = Problem(K=local.K, y=y, loss=loss(), regularizer=reg(), C=0.5)
    p_sh = Problem(K=sharded, y=y, loss=loss(), regularizer=reg(), C=0.5)
    eng = Spicy(tol=1e-6, method=method)
    before = sharded.comm.copy()
    r_mem = eng.solve(p_mem)
    r_sh = eng.solve(p_sh)
    assert r_mem.converged and r_sh.converged
    assert r_sh.iterations == r_mem.iterations
    assert len(r_sh.history) == len(r_mem.history)
    for a, b in zip(r_sh.history, r_mem.history):
        for key in ("iteration", "n_active", "newton_steps", "n_backtracks", "solver"):
            assert a.get(key) == b.get(key), key
    np.testing.assert_allclose(r_sh.alpha, r_mem.alpha, rtol=0, atol=1e-8)
    assert r_sh.bias == pytest.approx(r_mem.bias, abs=1e-8)
    assert r_sh.objective == pytest.approx(r_mem.objective, rel=1e-8, abs=1e-8)
    assert r_sh.dual_objective == pytest.approx(r_mem.dual_objective, rel=1e-8, abs=1e-8)
    assert r_sh.gap == pytest.approx(r_mem.gap, abs=1e-8)
    np.testing.assert_allclose(r_sh.kernel_weights, r_mem.kernel_weights, atol=1e-8)
    # the certificate code of engines/common on the sharded bank
    assert common.primal_objective(p_sh, r_sh.alpha, r_sh.bias) == pytest.approx(
        common.primal_objective(p_mem, r_sh.alpha, r_sh.bias), rel=1e-12
    )
    sent = sharded.comm - before
    assert sent.calls > 0 and sent.sent > 0 and sent.received > 0


def test_warm_start_on_sharded_bank(sharded, local, data):
    y = data[1]
    eng = Spicy(tol=1e-6, method="iterative")
    first = eng.solve(Problem(K=sharded, y=y, loss=Hinge(), regularizer=L1(), C=1.0))
    r_sh = eng.solve(Problem(K=sharded, y=y, loss=Hinge(), regularizer=L1(), C=0.5), warm_start=first)
    r_mem = eng.solve(Problem(K=local.K, y=y, loss=Hinge(), regularizer=L1(), C=0.5), warm_start=first)
    assert r_sh.iterations == r_mem.iterations
    np.testing.assert_allclose(r_sh.alpha, r_mem.alpha, atol=1e-8)


def test_problem_K_of_a_sharded_bank_is_refused(sharded, data):
    p = Problem(K=sharded, y=data[1], loss=Logistic(), regularizer=L1(), C=0.5)
    assert p.n_kernels == M and p.n_samples == 70 and p.bank is sharded
    with pytest.raises(
        BankAccessError,
        match=r"problem\.K: .*ShardedBank.*20 kernels on 70 points.*"
        r"engine 'spicy'",
    ):
        p.K
    assert "ShardedBank" in repr(p)


def test_proximal_engine_refuses_a_sharded_bank(sharded, data):
    p = Problem(K=sharded, y=data[1], loss=Logistic(), regularizer=L1(), C=0.5)
    with pytest.raises(
        BankAccessError,
        match=r"never gathered into one \(20, 70, 70\) array.*"
        r"reads the whole Gram bank",
    ):
        Proximal().solve(p)


def test_smo_mkl_refuses_a_sharded_bank(sharded, data):
    smo = pytest.importorskip("mklkit_smo.engine")
    from mklkit.components.kl import KL

    p = Problem(K=sharded, y=data[1], loss=Hinge(), regularizer=KL(), C=0.5)
    with pytest.raises(BankAccessError, match=r"engine 'spicy'"):
        smo.SmoMKL().solve(p)


def test_shard_over_its_worker_budget_is_refused(client, data):
    with pytest.raises(BankError, match=r"shard 0.*kernels 0\.\.9.*10 x 70 x 70.*worker tcp://.*1\.0 KiB"):
        ShardedBank.build(client, data[0], ENTRIES, memory_budget_bytes=1024)


def test_unknown_worker_and_closed_bank(client, data):
    with pytest.raises(ValueError, match=r"workers.*'tcp://nowhere:1'.*not a worker"):
        ShardedBank.build(client, data[0], ENTRIES, workers=["tcp://nowhere:1"])
    bank = ShardedBank.build(client, data[0], ["linear"])  # one kernel: one shard
    assert len(bank.workers) == 1 and bank.shape == (1, 70, 70)
    with bank:
        assert bank.dual_block_norms(np.ones(70)).shape == (1,)
    with pytest.raises(ShardLostError, match="closed"):
        bank.matvecs(np.ones(70))


def test_mklkit_run_on_a_sharded_bank_gives_the_in_memory_answer(client, tmp_path):
    import json

    import yaml

    from mklkit.api import load_spec, run
    from mklkit.cli import main

    spec = {
        "data": {"builtin": "liver", "test_size": 0.25, "seed": 0},
        "kernels": {"bank": [{"function": "rbf", "width": [1.0, 3.0]}, {"function": "poly", "degree": 2}]},
        "problem": {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": 0.5}, "C": 0.5},
        "engine": {"name": "spicy", "tol": 1e-9, "max_iter": 500},
    }
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(spec))
    local = run(load_spec(p))
    address = client.scheduler.address
    sharded = run(load_spec(p, [f"kernels.sharded.scheduler={address}"]))
    assert sharded.result.objective == pytest.approx(local.result.objective, rel=1e-8)
    np.testing.assert_allclose(sharded.result.kernel_weights, local.result.kernel_weights, atol=1e-8)
    assert sharded.metrics == pytest.approx(local.metrics, abs=1e-12)
    out = tmp_path / "out"
    assert main(["run", str(p), "--scheduler", address, "--out", str(out), "--quiet"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["spec"]["kernels"]["sharded"] == {"scheduler": address}
    assert s["objective"] == pytest.approx(local.result.objective, rel=1e-8)
    assert s["test_accuracy"] == pytest.approx(local.metrics["test_accuracy"], abs=1e-12)


def test_estimator_with_a_scheduler_gives_the_in_memory_answer(client, data):
    from mklkit.estimators import MKLClassifier

    X, y = data
    # C="scale": "auto" cross-validates the Gram matrices in memory, not a sharded bank
    local = MKLClassifier(ENTRIES, C="scale", tol=1e-9, max_iter=500).fit(X[:50], y[:50])
    sharded = MKLClassifier(ENTRIES, C="scale", tol=1e-9, max_iter=500, scheduler=client).fit(X[:50], y[:50])
    assert sharded.result_.objective == pytest.approx(local.result_.objective, rel=1e-8)
    np.testing.assert_allclose(sharded.decision_function(X[50:]), local.decision_function(X[50:]), rtol=1e-7, atol=1e-8)
