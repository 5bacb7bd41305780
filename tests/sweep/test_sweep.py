"""The sweep runner (issue 17) on a real Dask cluster: a scheduler and two worker processes on
127.0.0.1 (``distributed.LocalCluster(processes=True)``), started once for this module and
closed at the end, running small real power scenarios (MIT SuperCloud jobs + BurstGPT
per-minute tokens, 1 day, 64 GPUs)."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from conftest import shared
from scipy import stats

from analytics import store
from analytics.power import Scenario, sweep_points
from analytics.services import data as data_service
from analytics.services import power
from analytics.sweep import SweepCancelled, Task, run_sweep
from analytics.sweep import stats as S

SHARES = (0.0, 0.5, 1.0)


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0") as lc, \
            distributed.Client(lc, set_as_default=False) as client:
        yield lc.scheduler_address, client


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A store with the staged job and token traces, the fitted inputs, their key and the
    6 tasks of a 3-share x 2-replication sweep at U = 0.8."""
    db = tmp_path_factory.mktemp("sweep") / "s.duckdb"
    paths = [shared("mit_supercloud/slurm-log-queueing-clean.csv"),
             shared("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")]
    from analytics.ingest import files as ingest

    con = store.connect(db)
    ingest.ingest_files(con, [ingest.FileIn(p, p.name) for p in paths])
    inputs = power.load_inputs(con, None, None, 0)
    key_inputs = power.sweep_key_inputs(con, inputs, 0)
    con.close()
    base = Scenario(n_gpus=64, days=1.0, warmup_days=0.5)
    tasks = sweep_points.point_tasks(base, SHARES, (0.8,), replications=2, seed=0)
    return {"db": db, "inputs": inputs, "key_inputs": key_inputs, "tasks": tasks, "base": base}


def _stored(db, analysis: str) -> int:
    con = store.connect(db, read_only=True)
    try:
        frame = store.sweep_runs(con, analysis)
    finally:
        con.close()
    return int(frame["tasks"].sum()) if len(frame) else 0


def test_same_numbers_locally_and_on_the_cluster(setup, cluster):
    address, _ = cluster
    kwargs = {"shared": {"inputs": setup["inputs"]}, "key_inputs": setup["key_inputs"]}
    local = run_sweep(setup["tasks"], backend="local", **kwargs)
    remote = run_sweep(setup["tasks"], backend=address, **kwargs)
    assert local.backend == "local" and remote.backend == address
    assert remote.dashboard and remote.dashboard.startswith("http://127.0.0.1:")
    assert local.computed == remote.computed == 6 and local.results == remote.results
    assert [r["cv"] for r in local.results[:2]] != [None, None]
    # the services' table: 3 cells with 95 % t-intervals; the seeds are common to every cell
    table = sweep_points.sweep_table(setup["tasks"], remote.results)
    assert len(table) == 3 and (table["replications"] == 2).all()
    row = table.iloc[1]
    cvs = [r["cv"] for r in remote.results[2:4]]
    half = stats.t.ppf(0.975, 1) * np.std(cvs, ddof=1) / np.sqrt(2)
    assert row["cv"] == pytest.approx(np.mean(cvs))
    assert row["cv_hi95"] - row["cv"] == pytest.approx(half)
    verdicts = sweep_points.shape_verdicts(table)["0.8"]
    # issue 33: the verdict derived from the bands by the rule's words. A U shape holds at every
    # value inside the bands when the interior's highest CV is below both ends' lowest; it
    # fails at every value when even its lowest is not below the ends' highest
    t = table.sort_values("inference_share")
    lo, hi = t["cv_lo95"].to_numpy(), t["cv_hi95"].to_numpy()
    want = (True if hi[1] < min(lo[0], lo[2]) else False if lo[1] >= min(hi[0], hi[2])
            else S.NOT_DISTINGUISHABLE)
    assert verdicts["u_shape_cv"] == want
    assert verdicts["replications"] == 2 and verdicts["scheduler"] == "fcfs"


def test_a_worker_killed_mid_sweep_still_gives_every_task_once(tmp_path, cluster):
    address, client = cluster
    tasks = [Task("test.sleepy", "analytics.sweep.worker:sleepy", {"x": i, "sleep_s": 0.3}, i)
             for i in range(10)]
    pids = list(client.run(os.getpid).values())
    killed = []

    def kill_one(done: int, total: int) -> None:
        if done == 2 and not killed:
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    res = run_sweep(tasks, store=tmp_path / "k.duckdb", backend=address, progress=kill_one)
    assert killed and res.computed == 10 and res.cached == 0
    assert [r["twice"] for r in res.results] == [2 * i for i in range(10)]
    assert _stored(tmp_path / "k.duckdb", "test.sleepy") == 10  # every task once
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it for the next tests


def test_a_resumed_sweep_computes_only_the_missing_tasks_and_a_rerun_reads_them(setup, cluster,
                                                                                 capsys):
    address, _ = cluster
    db, tasks = setup["db"], setup["tasks"]
    kwargs = {"shared": {"inputs": setup["inputs"]}, "key_inputs": setup["key_inputs"],
              "store": db}
    seen = []
    with pytest.raises(SweepCancelled) as info:
        run_sweep(tasks, backend=address, progress=lambda done, total: seen.append(done),
                  cancel=lambda: seen[-1] >= 2, **kwargs)
    partial = info.value.partial
    stored = _stored(db, sweep_points.ANALYSIS)
    assert partial.computed == stored == 2
    resumed = run_sweep(tasks, backend=address, **kwargs)
    assert (resumed.computed, resumed.cached) == (len(tasks) - stored, stored)
    again = run_sweep(tasks, backend="local", **kwargs)
    assert (again.computed, again.cached, again.backend) == (0, len(tasks), "store")
    assert again.results == resumed.results
    con = store.connect(db, read_only=True)
    ledger = data_service.sweep_ledger(con, sweep_points.ANALYSIS)
    con.close()
    assert sum(r["tasks"] for r in ledger) == len(tasks)
    assert {r["ran_on"] for r in ledger} == {address}
    from harness import strict_loads

    from analytics import cli

    assert cli.main(["--db", str(db), "sweeps"]) == 0  # the same listing on the CLI
    listed = strict_loads(capsys.readouterr().out)
    assert sum(r["tasks"] for r in listed if r["analysis"] == sweep_points.ANALYSIS) == len(tasks)
    # another input (another fit seed) is another key: computed, not read
    other = run_sweep(tasks[:1], backend="serial", shared={"inputs": setup["inputs"]},
                      key_inputs={**setup["key_inputs"], "fit_seed": "1"}, store=db)
    assert other.computed == 1 and other.unsaved == 0


def test_verdicts_are_not_distinguishable_when_they_flip_within_the_bands():
    assert S.interior_below_ends([1.0, 0.2, 1.0], [1.2, 0.4, 1.2]) is True
    assert S.interior_below_ends([1.0, 1.3, 1.0], [1.2, 1.5, 1.2]) is False
    assert S.interior_below_ends([1.0, 0.9, 1.0], [1.2, 1.1, 1.2]) == S.NOT_DISTINGUISHABLE
    assert S.interior_above_ends([0.1, 0.5, 0.1], [0.2, 0.6, 0.2]) is True
    assert S.interior_below_ends([1.0, np.nan, 1.0], [1.2, np.nan, 1.2]) == \
        S.NOT_DISTINGUISHABLE  # one replication: no band
    mean, lo, hi, n = S.mean_ci([1.0, 2.0, 3.0])
    assert (mean, n) == (2.0, 3) and hi - mean == pytest.approx(stats.t.ppf(0.975, 2) / np.sqrt(3))
    assert np.isnan(S.mean_ci([1.0, np.nan])[1])


def test_the_sweeps_page_lists_the_stored_sweep_runs(app_env):
    from harness import new_app, table_with

    con = store.connect(app_env["db"])
    store.save_sweep_runs(con, [{"analysis": "power.sweep_point", "params_sha256": f"p{i}",
                                 "seed": i, "code_version": "c" * 64, "inputs_sha256": "i" * 64,
                                 "params": {"x": i}, "result": {"cv": 0.1 * i},
                                 "started": 1.7e9 + i, "finished": 1.7e9 + i + 2.0,
                                 "cpu_s": 1.5, "wall_s": 2.0, "ran_on": "tcp://10.0.0.5:8786"}
                                for i in range(3)])
    con.close()
    at = new_app().run()
    assert not at.exception
    assert any("3 sweep points are kept" in c.value for c in at.caption)  # the Data page's link
    at.switch_page("pages/sweeps.py").run()  # issue 31 item 11: the stored sweeps' own page
    assert not at.exception
    runs = table_with(at, "ran_on")
    assert runs[["analysis", "ran_on", "tasks"]].values.tolist() == [
        ["power.sweep_point", "tcp://10.0.0.5:8786", 3]]
    assert runs["cpu_s"].tolist() == [4.5] and runs["max_wall_s"].tolist() == [2.0]
    # points without the sweep's cells (another code version's fields): listed, no table
    assert not at.get("plotly_chart") and len(table_with(at, "result.cv")) == 3


def test_the_sidebar_shows_the_operators_cluster_and_links_its_dashboard(app_env, cluster,
                                                                       monkeypatch):
    """The scheduler comes from the operator ($HEADROOM_DASK_SCHEDULER here); the sidebar
    only shows it (no field a browser user could point elsewhere)."""
    from harness import new_app

    monkeypatch.setenv("HEADROOM_DASK_SCHEDULER", cluster[0])
    at = new_app().run()
    assert not at.exception
    assert not at.sidebar.text_input
    shown = " ".join(c.value for c in at.sidebar.caption)
    assert f"Dask cluster {cluster[0]} (plain TCP): 2 worker(s)" in shown
    assert "[Dask dashboard](http://127.0.0.1:" in shown


def test_cost_model_folds_on_the_cluster_give_the_in_process_fit(bench_db, cluster):
    """Issue 17, advisor-backtest folds: the fold fits as tasks on two Dask workers give the
    bit-identical model of the in-process fit (small settings: 2 targets, 20 trees)."""
    import pandas as pd

    from analytics.advisor import fold_points
    from analytics.advisor import model as cm

    address, _ = cluster
    con = store.connect(bench_db, read_only=True)
    bench = store.bench_runs(con)
    con.close()
    p = cm.FitParams(targets=("throughput_tok_s", "ttft_ms"), n_estimators=20)
    runs: list = []
    remote = cm.fit(bench, p, fold_points.runner(backend=address, runs=runs))
    local = cm.fit(bench, p)
    assert runs[0].backend == address and runs[0].computed == 16
    assert remote.metrics == local.metrics
    pd.testing.assert_frame_equal(remote.oof, local.oof, check_exact=True)
