"""Point forecasts: metric formulas, no leakage, and pinned results on real BurstGPT."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import shared

from analytics.envelope import forecast, grid
from analytics.ingest import files as ingest
from analytics.services.demand import demand_grid


def test_metric_formulas_by_hand():
    y = np.array([100.0, 50.0, 0.0, 250.0])
    yhat = np.array([90.0, 70.0, 10.0, 200.0])
    # |e| = 10, 20, 10, 50 -> sum 90, sum|y| = 400
    assert forecast.wape(y, yhat) == pytest.approx(90 / 400)
    assert forecast.mae(y, yhat) == pytest.approx(22.5)
    assert forecast.rmse(y, yhat) == pytest.approx(np.sqrt((100 + 400 + 100 + 2500) / 4))


@pytest.mark.parametrize("horizon", [1, 3, 12])
def test_no_feature_uses_the_target_bin_or_later(horizon):
    rng = np.random.default_rng(1)
    n = 16 * 288
    y = rng.gamma(2.0, 1000.0, n)
    ts = pd.date_range("2024-01-01", periods=n, freq="5min")
    base = forecast.make_features(y, ts, 300, horizon)
    for t in rng.integers(7 * 288 + 20, n - 1, size=25):
        tampered = y.copy()
        tampered[t - horizon + 1:] = rng.gamma(2.0, 5000.0, n - (t - horizon + 1))
        f = forecast.make_features(tampered, ts, 300, horizon)
        np.testing.assert_array_equal(f.X[: t + 1], base.X[: t + 1])
    # and the value at t - horizon does matter (the features are not empty of information)
    t = n - 1
    tampered = y.copy()
    tampered[t - horizon] += 1e6
    assert not np.array_equal(forecast.make_features(tampered, ts, 300, horizon).X[t], base.X[t])


def test_weekly_lag_only_with_two_weeks():
    ts13 = pd.date_range("2024-01-01", periods=13 * 288, freq="5min")
    assert "same_bin_7d" not in forecast.make_features(np.ones(len(ts13)), ts13, 300).names
    ts14 = pd.date_range("2024-01-01", periods=14 * 288, freq="5min")
    assert "same_bin_7d" in forecast.make_features(np.ones(len(ts14)), ts14, 300).names


def test_seasonal_naive():
    out = forecast.seasonal_naive(np.arange(6.0), 2)
    assert np.isnan(out[:2]).all() and out[2:].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_block_bootstrap_interval():
    rng = np.random.default_rng(0)
    a = 5 + np.abs(rng.normal(10, 3, 2000))
    b = a - 2.0  # model b is exactly 2 better everywhere
    ci = forecast.block_bootstrap_mae_diff(a, b, 288, rng, 500)
    assert ci["mae_gain"] == pytest.approx(2.0) and ci["lo"] == pytest.approx(2.0)
    noisy = np.abs(rng.normal(10, 3, 2000))
    ci2 = forecast.block_bootstrap_mae_diff(a, noisy, 288, rng, 500)
    assert ci2["lo"] < ci2["mae_gain"] < ci2["hi"]


def test_models_on_real_burstgpt_week(con):
    path = shared("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    g = demand_grid(con, "burstgpt1_week1_per_minute_tps", "5min")
    y = g["target"].to_numpy()
    f = forecast.make_features(y, g["ts"], 300)
    split = grid.chronological_split(len(y), 300)
    preds, fitted = forecast.point_forecasts(y, f, np.arange(split.fit.start, split.fit.stop))
    test = np.arange(split.test.start, split.test.stop)
    w = {m: forecast.wape(y[test], p[test]) for m, p in preds.items()}
    assert set(w) == {"persistence", "seasonal_daily", "ridge", "hgb", "extra_trees", "lightgbm"}
    assert w["lightgbm"] < w["seasonal_daily"] and w["hgb"] < w["seasonal_daily"]
    assert w["seasonal_daily"] == pytest.approx(0.5418, abs=1e-3)  # deterministic baseline
    assert w["hgb"] == pytest.approx(0.4455, abs=0.02)
