"""Point forecasts of the demand grid and their metrics.

Method source: "Conformal GPU Demand Envelopes and Power-Aware Scheduling for Heterogeneous AI
Clusters under Cold Start and Cross-Cloud Shift" (abstract): persistence, seasonality, Ridge,
histogram gradient boosting and Extra Trees on a 5-minute weighted-token grid with a
chronological 42/9/10-day split; WAPE and MAE with a block-bootstrap interval of the MAE gain.
LightGBM is added as a sixth model.

Features for a forecast ``h`` bins ahead of target bin ``t`` use only ``y[: t - h + 1]`` (values
known when the forecast is made) plus the calendar of ``t`` itself:

=================  ==========================================================================
feature            definition
=================  ==========================================================================
lag_k              ``y[t - k]`` for ``k = h .. h + 5``
same_bin_1d        ``y[t - P]`` (``P`` = bins per day), when ``P >= h``
same_bin_7d        ``y[t - 7P]``, when the series spans at least 14 days
mean_1h, std_1h    mean / std of the 1 hour of bins ending at ``t - h``
mean_1d            mean of the day of bins ending at ``t - h``
hour_sin/cos       hour of day of ``t`` on the unit circle
dow_sin/cos        day of week of ``t`` on the unit circle (relative for BurstGPT)
=================  ==========================================================================
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

POINT_MODELS = ("persistence", "seasonal_daily", "seasonal_weekly", "ridge", "hgb",
                "extra_trees", "lightgbm")
LEARNED = ("ridge", "hgb", "extra_trees", "lightgbm")
#: ``EnvelopeParams.base_model`` that lets the run choose: the learned model with the lowest
#: WAPE on the calibration window (issue 31 item 5), stated in the result
AUTO = "auto"


@dataclass(frozen=True)
class Features:
    """Design matrix of a grid.

    Attributes
    ----------
    X : ndarray of shape (n_bins, n_features), NaN where history is too short
    names : feature names, in column order
    valid : ndarray of shape (n_bins,), bool: every feature is known
    per_day : bins per day
    horizon : bins ahead
    """

    X: np.ndarray
    names: tuple[str, ...]
    valid: np.ndarray
    per_day: int
    horizon: int


def make_features(y: np.ndarray, ts: pd.Series | np.ndarray, bin_s: int, horizon: int = 1,
                  max_history_bins: int | None = None) -> Features:
    """Leakage-free features for forecasting ``y[t]`` from data up to ``t - horizon``.

    Parameters
    ----------
    y : ndarray of shape (n_bins,), the target per bin (complete grid, no gaps)
    ts : bin start times, shape (n_bins,)
    bin_s : bin width in seconds
    horizon : bins ahead, >= 1
    max_history_bins : drop features that need more history than this (cold start: a new
        trace with only a few hours behind it has no same-bin-yesterday value)

    Raises
    ------
    ValueError : horizon < 1

    >>> f = make_features(np.arange(10.0), pd.date_range("2024-01-01", periods=10, freq="5min"),
    ...                   300, 2)
    >>> float(f.X[5, f.names.index("lag_2")]), float(f.X[5, f.names.index("lag_3")])
    (3.0, 2.0)
    """
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1 bin, got {horizon}")
    n = len(y)
    per_day = max(1, int(round(86400 / bin_s)))
    per_hour = max(1, int(round(3600 / bin_s)))
    room = max_history_bins if max_history_bins is not None else n
    import polars as pl  # here, not at import: a cached envelope's reader never makes features

    frame = pl.DataFrame({"y": np.asarray(y, dtype=float)})
    known = pl.col("y").shift(horizon)  # y[t - h]
    exprs = [pl.col("y").shift(k).alias(f"lag_{k}") for k in range(horizon, horizon + 6)]
    if per_day >= horizon and room > per_day:
        exprs.append(pl.col("y").shift(per_day).alias("same_bin_1d"))
    if n >= 14 * per_day and room > 7 * per_day:
        exprs.append(pl.col("y").shift(7 * per_day).alias("same_bin_7d"))
    if per_hour > 1 and room > per_hour + horizon:
        exprs.append(known.rolling_mean(per_hour).alias("mean_1h"))
        exprs.append(known.rolling_std(per_hour).alias("std_1h"))
    if per_day > per_hour and room > per_day + horizon:
        exprs.append(known.rolling_mean(per_day).alias("mean_1d"))
    feats = frame.select(exprs)
    t = pd.to_datetime(pd.Series(np.asarray(ts)))
    hour = (t.dt.hour + t.dt.minute / 60).to_numpy()
    dow = t.dt.day_of_week.to_numpy()
    cal = np.column_stack([np.sin(2 * np.pi * hour / 24), np.cos(2 * np.pi * hour / 24),
                           np.sin(2 * np.pi * dow / 7), np.cos(2 * np.pi * dow / 7)])
    X = np.column_stack([feats.to_numpy().astype(float), cal])
    names = (*feats.columns, "hour_sin", "hour_cos", "dow_sin", "dow_cos")
    return Features(X, tuple(names), ~np.isnan(X).any(axis=1), per_day, horizon)


def seasonal_naive(y: np.ndarray, period: int) -> np.ndarray:
    """``yhat[t] = y[t - period]`` (NaN for the first ``period`` bins)."""
    out = np.full(len(y), np.nan)
    out[period:] = np.asarray(y, dtype=float)[:-period]
    return out


def make_model(name: str, seed: int):
    """A fresh, unfitted learned point model (scikit-learn API).

    Single-threaded (``n_jobs=1``): the envelope's fits are small (about 1 k rows for a week of
    5-minute bins, 10 k for 61 days), where a second OpenMP thread mostly spin-waits (issue 15
    profile: ~75 % of the envelope's CPU). Fit inside :func:`single_threaded` to hold
    scikit-learn's histogram gradient boosting (which has no ``n_jobs``) to one thread too.
    """
    if name == "ridge":
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        return make_pipeline(StandardScaler(), Ridge(alpha=1.0))
    if name == "hgb":
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, random_state=seed)
    if name == "extra_trees":
        from sklearn.ensemble import ExtraTreesRegressor

        return ExtraTreesRegressor(n_estimators=200, min_samples_leaf=2, n_jobs=1,
                                   random_state=seed)
    if name == "lightgbm":
        from lightgbm import LGBMRegressor

        return LGBMRegressor(n_estimators=300, learning_rate=0.05, num_leaves=31, n_jobs=1,
                             random_state=seed, verbose=-1)
    raise ValueError(f"unknown model {name!r}; learned models are {LEARNED}")


def single_threaded():
    """Context manager: OpenMP and BLAS pools held to one thread (threadpoolctl) while the
    envelope fits and predicts. Process-wide while it is held.

    Loads the fitting libraries first (:func:`load_fitters`): threadpoolctl limits only the
    pools of libraries already loaded, and this package imports them where it fits."""
    load_fitters()
    return threadpool_limits(limits=1)


def load_fitters() -> None:
    """Import LightGBM, scikit-learn's ensembles and MAPIE (the envelope's fitting libraries,
    with their OpenMP runtimes). Not at module import: a command that reads a cached envelope
    never needs them (about 1.5 s of CPU, issue 35)."""
    import lightgbm  # noqa: F401
    import mapie.regression  # noqa: F401
    import sklearn.ensemble  # noqa: F401


def one_thread(fn):
    """Decorator: run ``fn`` inside :func:`single_threaded`."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with single_threaded():
            return fn(*args, **kwargs)
    return run


@one_thread
def point_forecasts(y: np.ndarray, feats: Features, fit_rows: np.ndarray, seed: int = 0,
                    models: tuple[str, ...] = POINT_MODELS) -> tuple[dict[str, np.ndarray], dict]:
    """Fit the learned models on ``fit_rows`` and predict every bin.

    Parameters
    ----------
    y : ndarray of shape (n_bins,)
    feats : from :func:`make_features`
    fit_rows : ndarray of int, rows to fit on (rows without full features are skipped)
    models : names from ``POINT_MODELS``; weekly seasonality is skipped below 14 days

    Returns
    -------
    preds : name -> ndarray of shape (n_bins,), NaN where a model cannot forecast
    fitted : name -> the fitted estimator (learned models only)
    """
    y = np.asarray(y, dtype=float)
    h = feats.horizon
    preds, fitted = {}, {}
    for name in models:
        if name == "persistence":
            preds[name] = seasonal_naive(y, h)
        elif name == "seasonal_daily":
            if feats.per_day >= h:
                preds[name] = seasonal_naive(y, feats.per_day)
        elif name == "seasonal_weekly":
            if len(y) >= 14 * feats.per_day:
                preds[name] = seasonal_naive(y, 7 * feats.per_day)
        else:
            rows = fit_rows[feats.valid[fit_rows]]
            model = make_model(name, seed).fit(feats.X[rows], y[rows])
            out = np.full(len(y), np.nan)
            out[feats.valid] = model.predict(feats.X[feats.valid])
            preds[name], fitted[name] = out, model
    return preds, fitted


def auto_base_model(y: np.ndarray, preds: dict[str, np.ndarray], calibration: slice) -> dict:
    """The learned point model with the lowest WAPE on the calibration window (``sum |y -
    yhat| / sum y`` over the window's bins where the model forecasts), for
    ``base_model="auto"``; ties and an undefined WAPE (zero demand there) keep the order of
    :data:`LEARNED`, whose first usable model wins when no WAPE is defined.

    Returns ``{"chosen", "by", "wape": {model: float or None}, "reason"}``."""
    yc = y[calibration]
    wape: dict[str, float | None] = {}
    for m in LEARNED:
        p = np.asarray(preds[m], float)[calibration]
        ok = np.isfinite(p)
        den = float(np.sum(yc[ok]))
        wape[m] = float(np.sum(np.abs(yc[ok] - p[ok])) / den) if ok.any() and den > 0 else None
    defined = {m: w for m, w in wape.items() if w is not None}
    if defined:
        chosen = min(defined, key=lambda m: (defined[m], LEARNED.index(m)))
        others = ", ".join(f"{m} {w:.1%}" for m, w in sorted(defined.items(), key=lambda kv: kv[1])
                           if m != chosen)
        reason = (f"{chosen}: the lowest WAPE on the calibration window ({defined[chosen]:.1%}"
                  + (f"; {others}" if others else "") + ")")
    else:
        chosen = "hgb"
        reason = "hgb: no WAPE is defined on the calibration window (no demand there)"
    return {"chosen": chosen, "by": "calibration WAPE", "wape": wape, "reason": reason}


def wape(y: np.ndarray, yhat: np.ndarray) -> float:
    """Weighted absolute percentage error ``sum|y - yhat| / sum|y|`` (a fraction, not %).

    Undefined (NaN) when the window has zero demand: the CLI prints it as null with the reason
    :data:`WAPE_UNDEFINED`, and MAE / RMSE stay defined.

    >>> wape(np.array([10.0, 0.0, 30.0]), np.array([12.0, 1.0, 27.0]))
    0.15
    >>> wape(np.zeros(3), np.ones(3))
    nan
    """
    total = float(np.abs(y).sum())
    return float(np.abs(y - yhat).sum() / total) if total > 0 else float("nan")


#: Why a WAPE is null: the denominator (total demand of the window) is zero.
WAPE_UNDEFINED = "zero demand in the test window"


def mae(y: np.ndarray, yhat: np.ndarray) -> float:
    """Mean absolute error, in the target's unit.

    >>> mae(np.array([10.0, 0.0, 30.0]), np.array([12.0, 1.0, 27.0]))
    2.0
    """
    return float(np.mean(np.abs(y - yhat)))


def rmse(y: np.ndarray, yhat: np.ndarray) -> float:
    """Root mean squared error, in the target's unit.

    >>> round(rmse(np.array([10.0, 0.0, 30.0]), np.array([12.0, 1.0, 27.0])), 4)
    2.1602
    """
    return float(np.sqrt(np.mean((y - yhat) ** 2)))


#: How :func:`block_bootstrap_mae_diff` chooses its block length by default (stated in the
#: envelope JSON and on the Demand page).
BLOCK_RULE = ("Politis-White (2004, with the Patton-Politis-White 2009 correction) optimal "
              "circular/moving-block length of the loss differential "
              "(arch.bootstrap.optimal_block_length), rounded up")

#: Fewer whole blocks than this in the test window: the bootstrap interval rests on too few
#: independent pieces to be trusted, and says so (``warning``).
MIN_BLOCKS = 10


def politis_white_block(d: np.ndarray) -> int:
    """Block length for a moving-block bootstrap of the mean of ``d`` (shape (n,)), in bins.

    The Politis & White (2004) automatic rule with the Patton, Politis & White (2009)
    correction, as ``arch.bootstrap.optimal_block_length`` implements it; its circular-bootstrap
    value is used, which is also the moving-block optimum (Politis & White 2004, section 3: the
    two share the bias and variance constants). Rounded up and kept in ``[1, n]``; 1 when the
    rule has nothing to estimate (a constant or too short series gives NaN).
    """
    import warnings

    from arch.bootstrap import optimal_block_length  # the envelope's own import, not the CLI's

    d = np.asarray(d, float)
    if len(d) < 2:
        return 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant series: 0 / 0 inside arch
        b = float(optimal_block_length(d)["circular"].iloc[0])
    if not np.isfinite(b):
        return 1
    return int(min(len(d), max(1, np.ceil(b))))


def block_bootstrap_mae_diff(err_a: np.ndarray, err_b: np.ndarray, block: int | None,
                             rng: np.random.Generator, n_boot: int = 2000,
                             level: float = 0.95) -> dict:
    """Moving-block bootstrap CI of ``MAE(a) - MAE(b)`` (positive: b is better).

    Blocks of ``block`` consecutive bins keep the dependence of the errors; ``None`` chooses
    the length from the data by :func:`politis_white_block` (:data:`BLOCK_RULE`) applied to the
    loss differential ``|a| - |b|``. ``ceil(n / block)`` block starts are drawn uniformly from
    ``0 .. n - block``, concatenated and cut to ``n`` (Kunsch 1989). The interval is the
    percentile interval. When fewer than :data:`MIN_BLOCKS` whole blocks fit in the ``n`` bins
    the interval is too rough to trust (with one block, nearly every resample is the same
    stretch of the window) and ``warning`` says so.

    Parameters
    ----------
    err_a, err_b : ndarray of shape (n,), absolute errors of the two models on the same bins
    block : block length in bins, or None for the Politis-White rule

    Returns
    -------
    ``{"mae_gain", "lo", "hi", "level", "block_bins", "block_rule", "n_blocks", "warning",
    "n_boot"}``: gains in the target's unit, ``n_blocks`` = whole blocks in the window
    (``n // block_bins``), ``warning`` None or the sentence to show
    """
    d = np.abs(np.asarray(err_a, float)) - np.abs(np.asarray(err_b, float))
    n = len(d)
    rule = BLOCK_RULE if block is None else "fixed"
    block = politis_white_block(d) if block is None else block
    block = max(1, min(block, n))
    n_blocks = int(np.ceil(n / block))
    starts = rng.integers(0, n - block + 1, size=(n_boot, n_blocks))
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(n_boot, -1)[:, :n]
    means = d[idx].mean(axis=1)
    q = (1 - level) / 2
    whole = n // block
    warning = None if whole >= MIN_BLOCKS else (
        f"only {whole} block(s) of {block} bins fit in the {n}-bin test window (fewer than "
        f"{MIN_BLOCKS}): the bootstrap interval is rough; use a longer test window")
    return {"mae_gain": float(d.mean()), "lo": float(np.quantile(means, q)),
            "hi": float(np.quantile(means, 1 - q)), "level": level, "block_bins": block,
            "block_rule": rule, "n_blocks": whole, "warning": warning, "n_boot": n_boot}
