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


def test_held_out_cell_and_random_fold_coverage_derived_by_hand():
    """Issue 33 (two planted bugs lived: held-out-cell coverage measured on the cells that sized
    the offset, and the random-fold offset sized on the grouped residuals). The demo's roofline
    grid, 8 B model at batch 1, 8 and 32: 3 workload cells X, Y, Z of 12 arms each. The fold
    runner is given by hand: grouped out-of-fold quantiles equal the truth in X and Y and sit 1
    (log units) above it in Z, so CQR scores are 0, 0, 1 per cell; random-fold ones are exact.
    With 3 cells, one is a half (``len // 2``) and two the other, alpha 0.2:

    * half X (or Y): X sizes offset 0 and covers 12 of Y + Z's 24 (0.5); Y + Z size the
      ceil(25 x 0.8) = 20th smallest of 12 zeros and 12 ones = 1, covering all of X: mean 0.75;
    * half Z: offset 1 covers all of X + Y; X + Y size 0 and cover none of Z: mean 0.5.

    Measured on their own calibration cells both halves would cover everything (1.0). The
    random-fold offset is the 30th smallest of 36 exact scores, 0, so it covers the 24 rows of
    X and Y among the grouped quantiles (2/3); sized on the grouped scores it would be 1 (1.0).
    """
    import numpy as np

    from analytics.ingest import demo

    bench = demo.synthetic_bench(np.random.default_rng(0)).frame.to_pandas()
    bench = bench[(bench["model"] == "synthetic/dense-8b") & bench["concurrency"].isin([1, 8, 32])]
    p = cm.FitParams(targets=("throughput_tok_s",), n_estimators=20, alpha=0.2)
    plan = cm.fold_plan(bench, p)["targets"]
    t = plan["throughput_tok_s"]
    in_z = np.char.endswith(t["groups"].astype(str), "|32.0")
    assert t["n_cells"] == 3 and in_z.sum() == 12 and len(t["y"]) == 36

    def runner(plan, params):
        out = {}
        for target, s, k in cm.fold_jobs(plan):
            test = plan[target]["splits"][s][k][1]
            shift = np.where(in_z[test], 1.0, 0.0) if s == "grouped" else np.zeros(len(test))
            out[(target, s, k)] = np.repeat((plan[target]["y"][test] + shift)[:, None], 3, 1)
        return out

    m = cm.fit(bench, p, folds=runner).metrics["throughput_tok_s"]
    assert m["coverage"]["held_out_cell"] in (0.75, 0.5)
    assert m["offset_log"]["random_fold"] == 0.0 and m["offset_log"]["held_out_cell"] == 1.0
    assert m["coverage"]["random_fold"] == pytest.approx(24 / 36)
