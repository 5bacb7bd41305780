"""Prediction intervals for the demand grid and how well they cover.

Methods at miscoverage ``alpha`` (nominal coverage ``1 - alpha``):

==================  ============================================================================
method              how
==================  ============================================================================
direct_quantile     LightGBM quantile loss at ``alpha/2`` and ``1 - alpha/2``, fit on the fit
                    window, no calibration
split               MAPIE ``SplitConformalRegressor`` (absolute residual) on the calibration
                    window around the prefit point model (Vovk et al. 2005; Lei et al. 2018)
cqr                 MAPIE ``ConformalizedQuantileRegressor`` with LightGBM quantile models
                    (Romano, Patterson & Candes 2019)
rolling             split conformal whose calibration residuals are a trailing window, updated
                    as each true value arrives (envelopes paper: "rolling conformal")
aci                 rolling + adaptive miscoverage ``alpha_t`` (Gibbs & Candes 2021):
                    ``alpha_{t+1} = alpha_t + gamma (alpha - err_t)``
regime              Mondrian split conformal: one residual quantile per regime, regime =
                    hour-of-day block (00-06, 06-12, 12-18, 18-24 UTC) x tercile of the point
                    forecast (tercile edges from the calibration window)
==================  ============================================================================

``rolling`` and ``aci`` are headroom's own vectorised loop; their quantiles follow MAPIE's
``TimeSeriesRegressor`` exactly (signed residuals ``y - yhat``, lower bound at level
``alpha_t / 2`` and upper at ``1 - alpha_t / 2``, each with the finite-sample level
``ceil(level (n + 1)) / n`` and numpy ``method="lower"``; a level above 1 gives an infinite
bound), so on the same data they return MAPIE's intervals (tested) in far less time
(``bench/bench_conformal.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from lightgbm import LGBMRegressor
from mapie.exchangeability_testing import OnlineMartingaleTest
from mapie.regression import ConformalizedQuantileRegressor, SplitConformalRegressor

INTERVAL_METHODS = ("direct_quantile", "split", "cqr", "rolling", "aci", "regime")
HOUR_BLOCKS = ((0, 6), (6, 12), (12, 18), (18, 24))


# ---------------------------------------------------------------- metrics
def coverage(y, lo, hi) -> float:
    """Share of ``y`` inside ``[lo, hi]``.

    >>> coverage(np.array([1.0, 5.0, 9.0]), np.array([0.0, 0.0, 0.0]), np.array([2.0, 6.0, 8.0]))
    0.6666666666666666
    """
    y = np.asarray(y, float)
    return float(np.mean((y >= lo) & (y <= hi)))


def mean_width(lo, hi) -> float:
    """Mean width ``hi - lo`` of the *finite* intervals, in the target's unit.

    ACI makes an interval infinite when ``alpha_t`` reaches 0 (it then covers anything); such
    bins are counted by :func:`infinite_bins`, not averaged in.
    """
    w = np.asarray(hi, float) - np.asarray(lo, float)
    w = w[np.isfinite(w)]
    return float(w.mean()) if w.size else float("inf")


def infinite_bins(lo, hi) -> int:
    """Number of intervals with an infinite bound."""
    return int((~np.isfinite(np.asarray(hi, float) - np.asarray(lo, float))).sum())


def winkler_score(y, lo, hi, alpha: float) -> float:
    """Mean interval (Winkler) score: width plus ``2/alpha`` times each miss distance.

    Lower is better; Gneiting & Raftery (2007), eq. 43.

    >>> winkler_score(np.array([5.0, 12.0]), np.array([0.0, 0.0]), np.array([10.0, 10.0]), 0.1)
    30.0
    """
    y, lo, hi = (np.asarray(a, float) for a in (y, lo, hi))
    below = np.where(y < lo, (2 / alpha) * (lo - y), 0.0)
    above = np.where(y > hi, (2 / alpha) * (y - hi), 0.0)
    return float(np.mean((hi - lo) + below + above))


def covered(y, lo, hi) -> np.ndarray:
    y = np.asarray(y, float)
    return (y >= lo) & (y <= hi)


def rolling_coverage(ts: pd.Series, hit: np.ndarray, window_bins: int) -> pd.DataFrame:
    """Trailing coverage over ``window_bins`` (e.g. one day) at each bin: ``ts``, ``coverage``."""
    cov = pd.Series(hit.astype(float)).rolling(window_bins, min_periods=window_bins).mean()
    return pd.DataFrame({"ts": np.asarray(ts), "coverage": cov.to_numpy()})


def coverage_by(groups: np.ndarray, hit: np.ndarray) -> pd.DataFrame:
    """Coverage and bin count per group label."""
    df = pd.DataFrame({"group": groups, "hit": hit.astype(float)})
    out = df.groupby("group", sort=True)["hit"].agg(["mean", "size"]).reset_index()
    return out.rename(columns={"mean": "coverage", "size": "bins"})


# ---------------------------------------------------------------- MAPIE-backed methods
def split_conformal(model, X_cal, y_cal, X_test, alpha: float):
    """MAPIE split conformal around a prefit point model; returns (lo, hi) of shape (n_test,)."""
    scr = SplitConformalRegressor(model, confidence_level=1 - alpha, prefit=True)
    scr.conformalize(X_cal, y_cal)
    _, pis = scr.predict_interval(X_test)
    return pis[:, 0, 0], pis[:, 1, 0]


def _quantile_lgbm(seed: int) -> LGBMRegressor:
    return LGBMRegressor(objective="quantile", alpha=0.5, n_estimators=300, learning_rate=0.05,
                         num_leaves=31, n_jobs=2, random_state=seed, verbose=-1)


def cqr(X_fit, y_fit, X_cal, y_cal, X_test, alpha: float, seed: int = 0):
    """MAPIE conformalized quantile regression with LightGBM; returns (lo, hi)."""
    reg = ConformalizedQuantileRegressor(_quantile_lgbm(seed), confidence_level=1 - alpha)
    reg.fit(X_fit, y_fit).conformalize(X_cal, y_cal)
    _, pis = reg.predict_interval(X_test)
    return pis[:, 0, 0], pis[:, 1, 0]


def direct_quantile(X_fit, y_fit, X_test, alpha: float, seed: int = 0):
    """LightGBM quantile regression at ``alpha/2`` and ``1 - alpha/2`` (no calibration)."""
    lo_m = _quantile_lgbm(seed).set_params(alpha=alpha / 2).fit(X_fit, y_fit)
    hi_m = _quantile_lgbm(seed).set_params(alpha=1 - alpha / 2).fit(X_fit, y_fit)
    lo, hi = lo_m.predict(X_test), hi_m.predict(X_test)
    return np.minimum(lo, hi), np.maximum(lo, hi)


# ---------------------------------------------------------------- own online loop
def _signed_bounds(sorted_scores: np.ndarray, alpha_t: float) -> tuple[float, float]:
    """MAPIE's asymmetric conformal offsets from sorted signed residuals (see module doc)."""
    n = len(sorted_scores)
    level = 1 - alpha_t / 2
    k = int(np.ceil(level * (n + 1)))
    if k > n:
        return -np.inf, np.inf
    # numpy quantile(method="lower") at k / n picks index floor((n - 1) k / n) = k - 1
    j = k - 1
    upper = sorted_scores[j]
    lower = sorted_scores[n - 1 - j]
    return lower, upper


def online_conformal(y: np.ndarray, yhat: np.ndarray, init_scores: np.ndarray, alpha: float,
                     gamma: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rolling conformal (``gamma = 0``) or ACI (``gamma > 0``) over a test stream.

    At step t the interval is ``yhat[t] + [lower, upper]`` from the signed residuals in the
    window (initially ``init_scores``, e.g. the calibration residuals); after ``y[t]`` arrives
    ``alpha_t`` is updated (ACI, Gibbs & Candes 2021, eq. 2; clipped to [0, 1] as in MAPIE) and
    the residual ``y[t] - yhat[t]`` replaces the oldest one in the window.

    Parameters
    ----------
    y, yhat : ndarray of shape (n_test,)
    init_scores : ndarray of shape (n_window,), signed residuals ``y - yhat``
    alpha : target miscoverage
    gamma : ACI step size (0 = plain rolling conformal)

    Returns
    -------
    lo, hi : ndarray of shape (n_test,)
    alpha_path : ndarray of shape (n_test,), the ``alpha_t`` used at each step
    """
    y = np.asarray(y, float)
    yhat = np.asarray(yhat, float)
    window = np.asarray(init_scores, float).copy()
    n_w = len(window)
    order = np.sort(window)
    lo, hi, path = np.empty(len(y)), np.empty(len(y)), np.empty(len(y))
    alpha_t = alpha
    head = 0  # index of the oldest residual in the ring buffer
    for t in range(len(y)):
        low_off, up_off = _signed_bounds(order, alpha_t)
        lo[t], hi[t], path[t] = yhat[t] + low_off, yhat[t] + up_off, alpha_t
        if gamma:
            err = not (lo[t] < y[t] < hi[t])
            alpha_t = min(1.0, max(0.0, alpha_t + gamma * (alpha - err)))
        new = y[t] - yhat[t]
        old = window[head]
        window[head] = new
        head = (head + 1) % n_w
        # keep `order` sorted: drop one copy of `old`, insert `new`
        i = np.searchsorted(order, old)
        order = np.delete(order, i)
        order = np.insert(order, np.searchsorted(order, new), new)
    return lo, hi, path


# ---------------------------------------------------------------- Mondrian by regime
def regimes(ts: pd.Series | np.ndarray, yhat: np.ndarray, edges: tuple[float, float]
            ) -> np.ndarray:
    """Regime label per bin: ``"HH-HH/low|mid|high"`` from hour block and forecast tercile."""
    hour = pd.to_datetime(pd.Series(np.asarray(ts))).dt.hour.to_numpy()
    block = np.searchsorted([6, 12, 18], hour, side="right")
    names = np.array([f"{a:02d}-{b:02d}" for a, b in HOUR_BLOCKS])
    load = np.array(["low", "mid", "high"])[np.searchsorted(edges, yhat, side="right")]
    return np.char.add(np.char.add(names[block], "/"), load)


def _abs_quantile(abs_res: np.ndarray, alpha: float) -> float:
    n = len(abs_res)
    k = int(np.ceil((1 - alpha) * (n + 1)))
    return np.inf if k > n else float(np.sort(abs_res)[k - 1])


def mondrian(y_cal, yhat_cal, ts_cal, yhat_test, ts_test, alpha: float):
    """Regime-conditioned (Mondrian) split conformal.

    Each regime gets its own ``ceil((1 - alpha)(n_r + 1))``-th smallest absolute calibration
    residual (Vovk et al. 2005, Mondrian conformal); a regime with fewer than
    ``ceil(1/alpha) - 1`` calibration bins, where that quantile does not exist, uses the pooled
    one instead.

    Returns
    -------
    lo, hi : ndarray of shape (n_test,)
    labels : regime of each test bin
    edges : the two tercile edges of the point forecast (from calibration)
    """
    y_cal, yhat_cal, yhat_test = (np.asarray(a, float) for a in (y_cal, yhat_cal, yhat_test))
    edges = tuple(np.quantile(yhat_cal, [1 / 3, 2 / 3]))
    lab_cal = regimes(ts_cal, yhat_cal, edges)
    lab_test = regimes(ts_test, yhat_test, edges)
    res = np.abs(y_cal - yhat_cal)
    pooled = _abs_quantile(res, alpha)
    q = {lab: _abs_quantile(res[lab_cal == lab], alpha) for lab in np.unique(lab_cal)}
    qt = np.array([q.get(lab, pooled) if np.isfinite(q.get(lab, pooled)) else pooled
                   for lab in lab_test])
    return yhat_test - qt, yhat_test + qt, lab_test, edges


# ---------------------------------------------------------------- shift alarm
def shift_alarm(model, X: np.ndarray, y: np.ndarray, test_level: float = 0.05,
                seed: int = 0) -> dict:
    """Exchangeability test martingale on the absolute residuals of a prefit model.

    MAPIE ``OnlineMartingaleTest`` (jumper martingale; Vovk et al. 2005, Sec. 7.1): under
    exchangeability the martingale exceeds ``1 / test_level`` with probability at most
    ``test_level``, so a crossing is evidence that the conformal coverage promise is breaking.

    Returns ``{"martingale": ndarray (n,), "threshold": float, "first_alarm": int | None}``.
    """
    import warnings

    # only the conformity scores feed the martingale; the level just has to be valid for few bins
    scr = SplitConformalRegressor(model, confidence_level=0.5, prefit=True)
    omt = OnlineMartingaleTest(scr, task="regression", test_level=test_level, warn=False,
                               burn_in=1, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        omt.update(np.asarray(X), np.asarray(y, float))
    mart = np.asarray(omt.martingale_value_history, float)
    over = np.flatnonzero(mart > omt.reject_threshold)
    return {"martingale": mart, "threshold": float(omt.reject_threshold),
            "first_alarm": int(over[0]) if over.size else None}
