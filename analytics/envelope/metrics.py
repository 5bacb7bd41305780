"""How well prediction intervals cover: coverage, width, interval score, rolling and per-group
coverage, and the exchangeability shift alarm.

Owns every measurement of an interval method on a test window; the methods themselves live in
:mod:`analytics.envelope.intervals` and the modules it registers.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd


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
    """Per-bin hit: bool ndarray of shape (n,), ``lo <= y <= hi``."""
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


def summary(y, lo, hi, alpha: float) -> dict:
    """``{"coverage", "mean_width", "infinite_bins", "winkler"}`` of one method on a window.

    Parameters
    ----------
    y, lo, hi : ndarray of shape (n,), in the target's unit
    alpha : nominal miscoverage (the interval score's miss penalty is ``2 / alpha``)
    """
    return {"coverage": float(covered(y, lo, hi).mean()), "mean_width": mean_width(lo, hi),
            "infinite_bins": infinite_bins(lo, hi), "winkler": winkler_score(y, lo, hi, alpha)}


def shift_alarm(model, X: np.ndarray, y: np.ndarray, test_level: float = 0.05,
                seed: int = 0) -> dict:
    """Exchangeability test martingale on the absolute residuals of a prefit model.

    MAPIE ``OnlineMartingaleTest`` (jumper martingale; Vovk et al. 2005, Sec. 7.1): under
    exchangeability the martingale exceeds ``1 / test_level`` with probability at most
    ``test_level``, so a crossing is evidence that the conformal coverage promise is breaking.

    Parameters
    ----------
    model : prefit point model (scikit-learn API)
    X : ndarray of shape (n, n_features); y : ndarray of shape (n,), in time order

    Returns ``{"martingale": ndarray (n,), "threshold": float, "first_alarm": int | None}``.
    """
    from mapie.exchangeability_testing import OnlineMartingaleTest
    from mapie.regression import SplitConformalRegressor

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
