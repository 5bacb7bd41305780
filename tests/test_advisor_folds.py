"""The cost model's out-of-fold fits on the sweep runner (issue 17, "advisor-backtest folds"):
the same numbers as the in-process fit, kept in ``sweep_runs`` and read back on a refit, and
the same on a real Dask cluster (tests/sweep/test_sweep.py starts it). Small fit settings (two
targets, 20 trees) on the staged advisor benchmarks keep each test near a second of CPU."""

from __future__ import annotations

import pandas as pd
import pytest

from analytics import store
from analytics.advisor import fold_points
from analytics.advisor import model as cm

SMALL = cm.FitParams(targets=("throughput_tok_s", "ttft_ms"), n_estimators=20)


@pytest.fixture(scope="module")
def bench(bench_db):
    con = store.connect(bench_db, read_only=True)
    try:
        return store.bench_runs(con)
    finally:
        con.close()


@pytest.fixture(scope="module")
def in_process(bench):
    return cm.fit(bench, SMALL)


def assert_same_fit(a: cm.CostModel, b: cm.CostModel) -> None:
    assert a.metrics == b.metrics and a.offsets == b.offsets
    pd.testing.assert_frame_equal(a.oof, b.oof, check_exact=True)


def test_fold_plan_has_one_task_per_target_scheme_and_fold(bench):
    plan = cm.fold_plan(bench, SMALL)["targets"]
    tasks = fold_points.tasks(plan, SMALL)
    # throughput: 5 grouped + 5 random folds; TTFT is measured in 3 cells: 3 + 3
    assert [len(plan[t]["splits"]["grouped"]) for t in SMALL.targets] == [5, 3]
    assert len(tasks) == 16 and len({(t.params["target"], t.params["scheme"], t.params["fold"])
                                     for t in tasks}) == 16
    assert {t.seed for t in tasks} == {0} and tasks[0].params["fit"]["n_estimators"] == 20


def test_runner_gives_the_in_process_numbers_and_a_refit_reads_the_stored_folds(
        bench, in_process, tmp_path):
    db = tmp_path / "folds.duckdb"
    store.connect(db).close()
    runs: list = []
    keys = fold_points.key_inputs({"bench_runs:x": "sha-a"})
    fit = cm.fit(bench, SMALL, fold_points.runner(store=db, backend="serial", key_inputs=keys,
                                                  runs=runs))
    assert_same_fit(fit, in_process)
    assert (runs[0].computed, runs[0].cached) == (16, 0)
    again = cm.fit(bench, SMALL, fold_points.runner(store=db, backend="serial", key_inputs=keys,
                                                    runs=runs))
    assert_same_fit(again, in_process)
    assert (runs[1].computed, runs[1].cached) == (0, 16)  # read, not refitted
    other = fold_points.key_inputs({"bench_runs:x": "sha-b"})  # other data: a new key
    cm.fit(bench, SMALL, fold_points.runner(store=db, backend="serial", key_inputs=other,
                                            runs=runs))
    assert runs[2].computed == 16
