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


def _ar1(phi: float, n: int, seed: int) -> np.ndarray:
    e = np.random.default_rng(seed).normal(size=n)
    x = np.empty(n)
    x[0] = e[0] / np.sqrt(1 - phi ** 2)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return x


def test_politis_white_block_on_ar1_matches_arch_and_theory():
    """AR(1), phi = 0.5, n = 2000: the block is arch's circular value rounded up, and near the
    rule's population value. With gamma_k = phi^|k| / (1 - phi^2): G = sum |k| gamma_k = 16/3,
    sigma_inf^2 = sum gamma_k = 1 / (1 - phi)^2 = 4, D_CB = 4/3 sigma_inf^4 = 64/3, so
    b_opt = (2 G^2 n / D_CB)^(1/3) = (8 n / 3)^(1/3) = 17.47 bins (Politis & White 2004,
    eq. 6 and Table of constants; Patton, Politis & White 2009)."""
    from arch.bootstrap import optimal_block_length

    x = _ar1(0.5, 2000, seed=0)
    want = optimal_block_length(x)["circular"].iloc[0]
    b = forecast.politis_white_block(x)
    assert b == int(np.ceil(want))
    assert b == pytest.approx((8 * 2000 / 3) ** (1 / 3), rel=0.35)
    assert forecast.politis_white_block(_ar1(0.0, 2000, seed=1)) <= 3  # white noise: short blocks
    assert forecast.politis_white_block(np.full(50, 2.0)) == 1  # nothing to estimate


def test_mae_gain_states_block_rule_and_warns_on_short_window():
    rng = np.random.default_rng(0)
    a = np.abs(_ar1(0.5, 2000, seed=2)) + 3
    b = np.abs(_ar1(0.5, 2000, seed=3)) + 2
    ci = forecast.block_bootstrap_mae_diff(a, b, None, rng, 300)
    assert ci["block_rule"] == forecast.BLOCK_RULE and "Politis-White" in ci["block_rule"]
    assert ci["block_bins"] == forecast.politis_white_block(np.abs(a) - np.abs(b))
    assert ci["n_blocks"] == 2000 // ci["block_bins"] >= 10 and ci["warning"] is None
    # the case: a 323-bin test window and day-long (288-bin) blocks
    short = forecast.block_bootstrap_mae_diff(a[:323], b[:323], 288, rng, 300)
    assert short["block_rule"] == "fixed" and short["n_blocks"] == 1
    assert "only 1 block(s) of 288 bins" in short["warning"] and "fewer than 10" in short["warning"]
    # the rule on a strongly dependent short window: fewer than 10 of its blocks fit
    x = _ar1(0.95, 100, seed=4)  # the rule gives 12-bin blocks: 8 fit
    ruled = forecast.block_bootstrap_mae_diff(x + 10, np.zeros(100), None, rng, 300)
    assert ruled["n_blocks"] < 10 and ruled["warning"].startswith(f"only {ruled['n_blocks']} ")


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


def test_bootstrap_interval_is_95_percent_by_the_central_limit_theorem():
    """Issue 33 (a planted 90 % interval lived). With 1-bin blocks the moving-block bootstrap is
    the iid bootstrap: for a 0/1 loss differential with mean 0.5 over n = 400 bins, resample
    means are about Normal(0.5, sqrt(0.25 / 400) = 0.025), so the 95 % percentile interval is
    0.5 +- 1.96 x 0.025 = +-0.049 (a 90 % one would be +-0.041)."""
    d = np.tile([1.0, 0.0], 200)
    ci = forecast.block_bootstrap_mae_diff(d, np.zeros(400), 1, np.random.default_rng(0), 20_000)
    assert ci["level"] == 0.95
    assert (ci["hi"] - ci["lo"]) / 2 == pytest.approx(1.96 * 0.025, rel=0.05)


def test_bootstrap_block_starts_reach_the_end_of_the_window():
    """Issue 33 (a planted bug lived: block starts stopped one short of ``n - block``). Only the
    last start (5 of 0..5, 10 bins, 5-bin blocks) covers bin 9, the one nonzero loss; each of the
    2 blocks of a resample misses it with probability 5/6, so about 31 % of resamples hold it
    and the upper percentile is at least 0.1 (one copy in 10 bins). Without the last start every
    resample mean is 0."""
    d = np.zeros(10)
    d[-1] = 1.0
    ci = forecast.block_bootstrap_mae_diff(d, np.zeros(10), 5, np.random.default_rng(1), 2000)
    assert ci["hi"] >= 0.1 and ci["lo"] == 0.0
