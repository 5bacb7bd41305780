"""Demand is never negative (issue 14 item 6): every forecast row of an envelope run satisfies
``0 <= lower <= point <= upper``, and the repairs are counted (case 15 of ../shared/cases, and
a synthetic zero-heavy bursty series written here)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, shared
from harness import strict_loads

from analytics import store
from analytics.envelope import forecast, repair
from analytics.envelope import pipeline as envelope
from analytics.envelope.conformal_methods import direct_quantile
from analytics.envelope.grid import chronological_split
from analytics.envelope.registry import INTERVAL_METHODS
from analytics.ingest import files as ingest
from analytics.services.demand import demand_grid

CASE = "15-bursty-zero-heavy-cqr"


def case_path():
    return shared("../cases/15-bursty-zero-heavy-cqr.csv")


@pytest.fixture(scope="module")
def case_grid():
    con = store.connect(":memory:")
    path = case_path()
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    grid = demand_grid(con, CASE, "5min")
    con.close()
    return grid


@pytest.fixture(scope="module")
def case_result(case_grid):
    return envelope.run_envelope(case_grid.copy(), 300, envelope.EnvelopeParams(alpha=0.1,
                                                                               n_boot=200))


def raw_forecasts(grid: pd.DataFrame, bin_s: int, params: envelope.EnvelopeParams):
    """The point models exactly as run_envelope fits them, before any repair."""
    y = grid["target"].to_numpy(float)
    ts = pd.to_datetime(grid["ts"]).reset_index(drop=True)
    split = chronological_split(len(y), bin_s, params.split_days, params.split_frac)
    feats = forecast.make_features(y, ts, bin_s, params.horizon)
    preds, _ = forecast.point_forecasts(y, feats, np.arange(split.fit.start, split.fit.stop),
                                        params.seed)
    return y, feats, split, preds


def assert_ordered(result: envelope.EnvelopeResult):
    """0 <= lower <= point <= upper on every test row, for every method; no negative point
    forecast anywhere in the series."""
    t = result.test
    point = t["yhat"].to_numpy()
    assert (point >= 0).all()
    for m in INTERVAL_METHODS:
        lo, hi = t[f"{m}_lo"].to_numpy(), t[f"{m}_hi"].to_numpy()
        assert (lo >= 0).all(), m
        assert (lo <= point).all(), m
        assert (point <= hi).all(), m
    for model in result.series.columns[3:]:
        values = result.series[model].to_numpy()
        assert (values[np.isfinite(values)] >= 0).all(), model


def test_repair_band_by_hand():
    point = np.array([0.0, 5.0, 2.0, 0.0, 4.0])
    raw = np.array([-3.0, 5.0, 2.0, -1.0, 4.0])
    lower = np.array([-4.0, 7.0, 1.0, -2.0, 1.0])
    upper = np.array([-1.0, 3.0, 6.0, -np.inf, np.inf])
    lo, hi, counts = repair.repair_band(point, lower, upper, raw)
    # bin 1: crossed (7 > 3) -> [3, 7]; bin 3: crossed (-2 > -inf) -> [-inf, -2] -> [0, 0]
    assert lo.tolist() == [0.0, 3.0, 1.0, 0.0, 1.0]
    assert hi.tolist() == [0.0, 7.0, 6.0, 0.0, np.inf]
    assert counts == {"bins": 5, "repaired_negative_point": 2, "repaired_negative_lower": 2,
                      "repaired_negative_upper": 2, "repaired_crossing": 1 + 1,
                      "point_outside_band": 0}
    # a quantile band that misses the point is extended to it, and counted
    lo, hi, counts = repair.repair_band(np.array([10.0, 0.5]), np.array([2.0, 1.0]),
                                        np.array([6.0, 3.0]), np.array([10.0, 0.5]))
    assert (lo.tolist(), hi.tolist()) == ([2.0, 0.5], [10.0, 3.0])
    assert counts["point_outside_band"] == 2
    with pytest.raises(ValueError, match="nonnegative"):
        repair.repair_band(np.array([-1.0]), np.zeros(1), np.ones(1), np.array([-1.0]))


def test_case15_every_row_is_ordered(case_result):
    assert_ordered(case_result)
    assert set(case_result.repairs.query("kind == 'interval'")["method"]) == set(INTERVAL_METHODS)


def test_case15_repair_counts_derived_from_the_raw_models(case_grid, case_result):
    """The counts are the raw models' negative forecasts and crossings on this file, and they
    are not zero: this file makes point models go negative (the case's claim)."""
    params = case_result.params
    y, feats, split, raw = raw_forecasts(case_grid, 300, params)
    rep = case_result.repairs.set_index("method")
    for model, values in raw.items():
        assert rep.loc[model, "repaired_negative_point"] == int((values < 0).sum()), model
        assert rep.loc[model, "bins"] == int(np.isfinite(values).sum())
    assert sum(int((v < 0).sum()) for v in raw.values()) > 0
    test = np.arange(split.test.start, split.test.stop)
    negative_base = int((raw[params.base_model][test] < 0).sum())
    assert negative_base > 0
    for m in INTERVAL_METHODS:
        assert rep.loc[m, "repaired_negative_point"] == negative_base
        assert rep.loc[m, "bins"] == len(test)
    # direct quantiles exactly as the method fits them: their crossings are counted
    fit = np.arange(split.fit.start, split.fit.stop)
    fit = fit[feats.valid[fit]]
    lo, hi = direct_quantile(feats.X[fit], y[fit], feats.X[test], params.alpha, params.seed)
    assert rep.loc["direct_quantile", "repaired_crossing"] == int((lo > hi).sum())
    assert rep.loc["direct_quantile", "repaired_negative_lower"] == int(
        (np.minimum(lo, hi) < 0).sum())


def test_case15_coverage_on_the_repaired_band(case_result):
    """Coverage is reported beside nominal and measured on the band the row shows."""
    doc = envelope.to_json(case_result)
    t = case_result.test
    y = t["y"].to_numpy()
    for m in INTERVAL_METHODS:
        hit = (y >= t[f"{m}_lo"]) & (y <= t[f"{m}_hi"])
        assert doc["intervals"][m]["coverage"] == pytest.approx(hit.mean())
    assert doc["alpha"] == 0.1
    assert doc["repairs"]["intervals"]["split"]["repaired_negative_point"] > 0
    json.dumps(doc, allow_nan=False)


def test_case15_cli_reports_repairs(case_result, tmp_path):
    db = tmp_path / "case15.duckdb"
    run = [sys.executable, "-m", "analytics.cli", "--db", str(db)]
    subprocess.run([*run, "ingest", str(case_path())], check=True, capture_output=True,
                   cwd=REPO)
    out = subprocess.run([*run, "envelope", CASE, "--bin", "5min", "--alpha", "0.1"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    doc = strict_loads(out.stdout)
    assert doc["repairs"] == envelope.to_json(case_result)["repairs"]


def test_synthetic_zero_heavy_bursts_stay_ordered():
    """A series of our own of the same kind: 3 days of 5-minute bins, 85 % zeros, bursts of
    heavy-tailed size, a few per day; at a wide alpha the bands are tight and cross zero (one
    envelope run: the suite's time budget)."""
    rng = np.random.default_rng(7)
    n = 3 * 288
    ts = pd.date_range("2024-03-01", periods=n, freq="5min")
    busy = rng.random(n) < np.where((ts.hour >= 9) & (ts.hour < 17), 0.3, 0.05)
    y = np.where(busy, rng.pareto(1.5, n) * 400, 0.0).round()
    grid = pd.DataFrame({"ts": ts, "target": y})
    for alpha in (0.4,):
        r = envelope.run_envelope(grid, 300, envelope.EnvelopeParams(alpha=alpha, n_boot=100))
        assert_ordered(r)
        rep = r.repairs.set_index("method")
        raw_negative = rep.loc[list(r.series.columns[3:]), "repaired_negative_point"].sum()
        clipped = int((r.series.iloc[:, 3:] == 0).sum().sum())
        assert raw_negative <= clipped  # every repaired point now reads 0
        assert (r.repairs.iloc[:, 2:] >= 0).all().all()
