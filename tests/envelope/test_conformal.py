"""Interval methods: formulas, MAPIE equivalence of the own ACI loop, Mondrian, shift alarm,
and the one protocol every registered method follows."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from mapie.regression import TimeSeriesRegressor
from sklearn.linear_model import LinearRegression

from analytics.envelope import forecast, grid, metrics, mondrian, online, registry
from analytics.envelope.conformal_methods import split_conformal
from analytics.envelope.intervals import IntervalData, IntervalMethod, Intervals


def test_coverage_width_and_interval_score_by_hand():
    y = np.array([5.0, 12.0, -1.0, 3.0])
    lo = np.array([0.0, 0.0, 0.0, 3.0])
    hi = np.array([10.0, 10.0, 10.0, 4.0])
    assert metrics.coverage(y, lo, hi) == 0.5  # 5 and 3 in; 12 and -1 out
    assert metrics.mean_width(lo, hi) == pytest.approx((10 + 10 + 10 + 1) / 4)
    # misses: 12 is 2 above, -1 is 1 below; alpha = 0.2 -> penalty 2/0.2 = 10 per unit
    assert metrics.winkler_score(y, lo, hi, 0.2) == pytest.approx((31 + 10 * 2 + 10 * 1) / 4)


@pytest.fixture(scope="module")
def week(week_grid):
    g = week_grid
    y = g["target"].to_numpy()
    f = forecast.make_features(y, g["ts"], 300)
    s = grid.chronological_split(len(y), 300)
    preds, fitted = forecast.point_forecasts(y, f, np.arange(s.fit.start, s.fit.stop),
                                             models=("hgb",))
    cal = np.arange(s.calibration.start, s.calibration.stop)
    test = np.arange(s.test.start, s.test.stop)
    return {"y": y, "X": f.X, "yhat": preds["hgb"], "model": fitted["hgb"], "cal": cal,
            "test": test, "ts": g["ts"]}


@pytest.mark.parametrize("gamma", [0.0, 0.005, 0.05])
def test_own_online_loop_equals_mapie_time_series_regressor(week, gamma):
    y, X, yhat, cal, test = week["y"], week["X"], week["yhat"], week["cal"], week["test"]
    test = test[:150]
    lo, hi, _ = online.online_conformal(y[test], yhat[test], y[cal] - yhat[cal], 0.1, gamma)
    ref = TimeSeriesRegressor(week["model"], method="aci", cv="prefit").fit(X[cal], y[cal])
    mlo, mhi = [], []
    # one thread: 450 single-row HGB predicts, where a second OpenMP thread only spin-waits
    with warnings.catch_warnings(), forecast.single_threaded():
        warnings.simplefilter("ignore")
        for i in test:
            _, pis = ref.predict(X[i:i + 1], confidence_level=0.9, allow_infinite_bounds=True)
            mlo.append(pis[0, 0, 0])
            mhi.append(pis[0, 1, 0])
            if gamma:
                ref.adapt_conformal_inference(X[i:i + 1], y[i:i + 1], gamma=gamma,
                                              confidence_level=0.9)
            ref.update(X[i:i + 1], y[i:i + 1])
    np.testing.assert_allclose(lo, mlo, rtol=0, atol=1e-6)
    np.testing.assert_allclose(hi, mhi, rtol=0, atol=1e-6)


def test_aci_alpha_moves_against_misses():
    y = np.r_[np.zeros(50), np.full(50, 100.0)]  # a level shift the window has not seen
    lo, hi, path = online.online_conformal(y, np.zeros(100), np.linspace(-1, 1, 40), 0.1, 0.05)
    assert path[0] == 0.1 and path[60] < path[50]  # misses after the shift lower alpha_t
    assert np.isinf(hi[-1]) or hi[-1] > 50  # ... widening the interval until it covers again


def test_aci_path_and_bounds_match_a_hand_derivation():
    """Gibbs & Candes (2021) eq. 2, alpha_{t+1} = alpha_t + gamma (alpha - err_t), worked by hand
    on 19 window residuals -9..9 (alpha 0.2, gamma 0.1, forecast 0). Step 0: level 0.9 gives
    k = ceil(0.9 * 20) = 18, offsets sorted[17] = 8 and sorted[1] = -8; y = 0 is a hit, so
    alpha = 0.2 + 0.1 * 0.2 = 0.22 and residual 0 replaces -9. Step 1: k = ceil(0.89 * 20) =
    18, band [-7, 8]; y = 20 misses, alpha = 0.22 + 0.1 * (0.2 - 1) = 0.14; 20 replaces -8.
    Step 2: k = ceil(0.93 * 20) = 19, the window's extremes [-7, 20]; y = 5 hits, alpha 0.16.
    A flipped update sign gives 0.18 at step 1 and fails here."""
    y = np.array([0.0, 20.0, 5.0, 0.0])
    lo, hi, path = online.online_conformal(y, np.zeros(4), np.arange(-9.0, 10.0), 0.2, 0.1)
    np.testing.assert_allclose(path, [0.2, 0.22, 0.14, 0.16], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(lo[:3], [-8, -7, -7])
    np.testing.assert_array_equal(hi[:3], [8, 8, 20])


def test_aci_stays_finite_on_perfectly_constant_demand():
    """Issue 14 item 7: a zero-width band that contains y is a hit (closed interval, Gibbs &
    Candes 2021 eq. 1), so constant demand does not drive alpha_t to 0 and the bounds to
    infinity -- MAPIE's open-interval test does."""
    y = np.full(400, 500.0)
    lo, hi, path = online.online_conformal(y, y.copy(), np.zeros(60), 0.1, 0.005)
    assert np.isfinite(lo).all() and np.isfinite(hi).all()
    assert (lo == 500).all() and (hi == 500).all() and path[-1] > 0.1  # all hits: alpha_t rises


def test_aci_judges_misses_on_the_band_clipped_at_zero():
    """Zero demand, residual offsets that put the raw band below 0 (case 27's shape): the band
    as reported is clipped at 0 and covers the zero bins; judged on the raw band every bin would
    be a miss and the band would become infinite."""
    y, yhat = np.zeros(300), np.linspace(100, 20, 300)  # falling forecast over zero demand
    init = -np.linspace(110, 100.2, 50)  # residuals y - yhat: the raw upper bound is below 0
    lo, hi, _ = online.online_conformal(y, yhat, init, 0.1, 0.05, floor=0.0)
    assert np.isfinite(hi).all()
    assert (np.maximum(lo, 0) <= 0).all()  # the clipped band covers every zero bin
    lo_open, hi_open, _ = online.online_conformal(y, yhat, init, 0.1, 0.05)
    assert (hi_open[:2] < 0).all() and np.isinf(hi_open).sum() > 200  # raw: blows up


def test_split_and_regime_cover_exchangeable_data():
    rng = np.random.default_rng(3)
    n = 6000
    X = rng.normal(size=(n, 2))
    y = X @ [3.0, -1.0] + rng.normal(scale=1 + np.abs(X[:, 0]), size=n)
    m = LinearRegression().fit(X[:2000], y[:2000])
    lo, hi = split_conformal(m, X[2000:4000], y[2000:4000], X[4000:], 0.1)
    assert metrics.coverage(y[4000:], lo, hi) == pytest.approx(0.9, abs=0.03)
    ts = pd.date_range("2024-01-01", periods=n, freq="5min")
    yhat = m.predict(X)
    lo, hi, labels, edges = mondrian.mondrian(y[2000:4000], yhat[2000:4000], ts[2000:4000],
                                               yhat[4000:], ts[4000:], 0.1)
    assert metrics.coverage(y[4000:], lo, hi) == pytest.approx(0.9, abs=0.03)
    assert len(set(labels)) == 12 and edges[0] < edges[1]


def test_regime_labels():
    ts = pd.to_datetime(["2024-01-01 03:00", "2024-01-01 07:00", "2024-01-01 23:59"])
    labels = mondrian.regimes(ts, np.array([1.0, 5.0, 9.0]), (3.0, 6.0))
    assert labels.tolist() == ["00-06/low", "06-12/mid", "18-24/high"]


def test_mondrian_quantile_index_matches_a_hand_derivation():
    """Vovk et al. (2005) Mondrian split conformal, worked by hand (alpha 0.25). Calibration:
    8 bins at 03:00, forecast 10, |residual| 1..8; 8 bins at 15:00, forecast 100, |residual|
    11, 22, .., 88; 3 bins at 09:00 and 2 at 21:00, forecast 50, |residual| 0.5, 0.25, 0.75 and
    0.1, 0.2. Tercile edges of the 21 forecasts: np.quantile at 1/3 (position 6.67) = 10 and at
    2/3 (position 13.33) = 100, so forecasts 10 and 50 are "mid" and 100 is "high".
    * 00-06/mid, n = 8: k = ceil(0.75 * 9) = ceil(6.75) = 7, the 7th smallest = 7.
    * 12-18/high, n = 8: k = 7 again, the 7th smallest = 77.
    * 06-12/mid, n = 3: k = ceil(0.75 * 4) = 3 = n, the largest = 0.75 (exists: k <= n).
    * 18-24/mid, n = 2: k = ceil(0.75 * 3) = 3 > 2, no quantile: the pooled one is used.
    * pooled, n = 21: k = ceil(0.75 * 22) = ceil(16.5) = 17; sorted |r| = 0.1, 0.2, 0.25, 0.5,
      0.75, 1..8 (13 values), 11, 22, 33, 44, ..: the 17th is 44. The unseen regime
      00-06/high (a 04:00 test bin with forecast 100) also gets 44.
    Test half-widths: 7, 77, 0.75, 44, 44. Dropping the "+1" (k = ceil(0.75 n)) gives 6, 66,
    0.75, 0.2, 33; indexing sorted[k - 2] gives 6, 66, 0.5, 44, 33; treating k = n as missing
    (k >= n) sends 06-12/mid to the pooled 44."""
    day = "2024-01-01 "
    ts_cal = pd.to_datetime([day + "03:00"] * 8 + [day + "15:00"] * 8 + [day + "09:00"] * 3
                            + [day + "21:00"] * 2)
    yhat_cal = np.array([10.0] * 8 + [100.0] * 8 + [50.0] * 5)
    res = np.array([1, -2, 3, -4, 5, -6, 7, -8, 11, -22, 33, -44, 55, -66, 77, -88,
                    0.5, -0.25, 0.75, 0.1, -0.2])
    ts_test = pd.to_datetime([day + h for h in ("03:30", "15:30", "09:30", "21:30", "04:00")])
    yhat_test = np.array([10.0, 100.0, 10.0, 10.0, 100.0])
    lo, hi, labels, edges = mondrian.mondrian(yhat_cal + res, yhat_cal, ts_cal, yhat_test,
                                              ts_test, 0.25)
    assert edges == (10.0, 100.0)
    assert labels.tolist() == ["00-06/mid", "12-18/high", "06-12/mid", "18-24/mid", "00-06/high"]
    np.testing.assert_array_equal(hi - yhat_test, [7, 77, 0.75, 44, 44])
    np.testing.assert_array_equal(yhat_test - lo, [7, 77, 0.75, 44, 44])


def test_shift_alarm_quiet_on_exchangeable_loud_on_shift():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 1))
    y = 2 * X[:, 0] + rng.normal(size=1500)
    m = LinearRegression().fit(X[:500], y[:500])
    quiet = metrics.shift_alarm(m, X[500:], y[500:])
    assert quiet["first_alarm"] is None and quiet["martingale"].max() < quiet["threshold"]
    y_shift = y.copy()
    y_shift[1000:] += 6.0
    loud = metrics.shift_alarm(m, X[500:], y_shift[500:])
    assert loud["first_alarm"] is not None and loud["first_alarm"] >= 500


def test_every_registered_method_follows_the_protocol(week):
    """One call per method, one return shape: Intervals with (n_test,) bounds, lower <= upper."""
    y, X, yhat, cal, test = week["y"], week["X"], week["yhat"], week["cal"], week["test"]
    test = test[:60]
    fit = np.arange(0, cal[0])
    fit = fit[np.isfinite(X[fit]).all(axis=1)]
    data = IntervalData(0.1, 0, week["model"], X[fit], y[fit], X[cal], y[cal], yhat[cal],
                        week["ts"].iloc[cal], X[test], y[test], yhat[test], week["ts"].iloc[test])
    assert registry.INTERVAL_METHODS == ("direct_quantile", "split", "cqr", "rolling", "aci",
                                         "regime")
    for name, cls in registry.METHODS.items():
        if name in ("direct_quantile", "cqr"):
            continue  # they fit LightGBM models: covered by the pipeline tests on the same week
        band = cls().predict_interval(data)
        assert isinstance(band, Intervals) and band.lower.shape == band.upper.shape == (60,)
        assert (band.lower <= band.upper).all()
    aci = registry.METHODS["aci"]().predict_interval(data)
    assert aci.extras["alpha"].shape == (60,) and aci.extras["alpha"][0] == 0.1
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.METHODS["split"])


def test_a_seventh_method_is_one_class():
    """A new method needs only a name and predict_interval; the pipeline's loop picks it up."""

    class Naive(IntervalMethod):
        name = "naive_pm1"

        def predict_interval(self, data):
            return Intervals(data.yhat_test - 1, data.yhat_test + 1)

    registry.register(Naive)
    try:
        one = np.zeros(1)
        data = IntervalData(alpha=0.1, seed=0, model=None, X_fit=one, y_fit=one, X_cal=one,
                            y_cal=one, yhat_cal=one, ts_cal=one, X_test=one, y_test=one,
                            yhat_test=np.array([5.0]), ts_test=one)
        band = registry.METHODS["naive_pm1"].from_params(None).predict_interval(data)
        assert (band.lower.tolist(), band.upper.tolist()) == ([4.0], [6.0])
    finally:
        del registry.METHODS["naive_pm1"]


def test_direct_quantile_and_cqr_share_two_quantile_fits_and_match_mapie(monkeypatch):
    """One run fits each LightGBM quantile model once (alpha/2 and 1 - alpha/2, shared by
    direct quantile and CQR), and CQR on those prefit models gives MAPIE's own CQR bounds."""
    from lightgbm import LGBMRegressor
    from mapie.regression import ConformalizedQuantileRegressor

    from analytics.envelope import conformal_methods

    def small(seed):
        return LGBMRegressor(objective="quantile", alpha=0.5, n_estimators=20, num_leaves=7,
                             n_jobs=1, random_state=seed, verbose=-1)

    fits = []
    monkeypatch.setattr(conformal_methods, "_quantile_lgbm",
                        lambda seed: fits.append(seed) or small(seed))
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 3))
    y = 10 + X @ np.array([2.0, -1.0, 0.5]) + rng.normal(size=400)
    one = np.zeros(100)
    data = IntervalData(0.1, 0, None, X[:200], y[:200], X[200:300], y[200:300], one, one,
                        X[300:], y[300:], one, one)
    direct = registry.METHODS["direct_quantile"]().predict_interval(data)
    band = registry.METHODS["cqr"]().predict_interval(data)
    assert len(fits) == 2 and len(data.fitted) == 2
    ref = ConformalizedQuantileRegressor(small(0), confidence_level=0.9)
    _, pis = ref.fit(X[:200], y[:200]).conformalize(X[200:300], y[200:300]).predict_interval(
        X[300:])
    np.testing.assert_allclose(band.lower, pis[:, 0, 0], rtol=1e-9)
    np.testing.assert_allclose(band.upper, pis[:, 1, 0], rtol=1e-9)
    assert (direct.lower <= direct.upper).mean() > 0.9


def test_regime_edges_are_terciles_of_the_calibration_forecast():
    """Issue 33 (a planted quartile mutant lived: the hand-derived test's edges coincide).
    300 calibration bins at 03:00 with forecasts 0..299: np.quantile at 1/3 (position 99.67) is
    99.67 and at 2/3 (position 199.33) 199.33, so 100 bins per regime. |residual| is 1 in the
    low third, 2 in the mid, 3 in the high; alpha 0.1 takes each regime's ceil(0.9 x 101) = 91st
    smallest of its 100, its own residual. Test forecasts 80, 150, 250 get half-widths 1, 2, 3.
    (Quartile edges 74.75 / 224.25 would put 80 in a 150-bin mid regime whose 136th smallest
    residual is 3.)"""
    yhat = np.arange(300.0)
    res = np.repeat([1.0, 2.0, 3.0], 100)
    ts = pd.to_datetime(["2024-01-01 03:00"] * 300)
    lo, hi, labels, edges = mondrian.mondrian(yhat + res, yhat, ts, np.array([80.0, 150, 250]),
                                              ts[:3], 0.1)
    assert edges == pytest.approx((299 / 3, 2 * 299 / 3))
    assert labels.tolist() == ["00-06/low", "00-06/mid", "00-06/high"]
    np.testing.assert_allclose((hi - lo) / 2, [1.0, 2.0, 3.0])
