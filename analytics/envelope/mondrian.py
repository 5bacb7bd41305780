"""Regime-conditioned (Mondrian) split conformal intervals.

Owns the regime labels (hour-of-day block x tercile of the point forecast), the per-regime
residual quantile (:func:`mondrian`) and the registered method :class:`RegimeMondrian`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analytics.envelope.intervals import IntervalData, IntervalMethod, Intervals

HOUR_BLOCKS = ((0, 6), (6, 12), (12, 18), (18, 24))


def regimes(ts: pd.Series | np.ndarray, yhat: np.ndarray, edges: tuple[float, float]
            ) -> np.ndarray:
    """Regime label per bin: ``"HH-HH/low|mid|high"`` from hour block and forecast tercile.

    Parameters
    ----------
    ts : bin start times, shape (n,)
    yhat : point forecast, shape (n,)
    edges : the two tercile edges of the forecast (see :func:`tercile_edges`)

    Returns str ndarray of shape (n,).
    """
    hour = pd.to_datetime(pd.Series(np.asarray(ts))).dt.hour.to_numpy()
    block = np.searchsorted([6, 12, 18], hour, side="right")
    names = np.array([f"{a:02d}-{b:02d}" for a, b in HOUR_BLOCKS])
    load = np.array(["low", "mid", "high"])[np.searchsorted(edges, yhat, side="right")]
    return np.char.add(np.char.add(names[block], "/"), load)


def tercile_edges(yhat_cal: np.ndarray) -> tuple[float, float]:
    """The 1/3 and 2/3 quantiles of the calibration window's point forecast."""
    return tuple(np.quantile(np.asarray(yhat_cal, float), [1 / 3, 2 / 3]))


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
    edges = tercile_edges(yhat_cal)
    lab_cal = regimes(ts_cal, yhat_cal, edges)
    lab_test = regimes(ts_test, yhat_test, edges)
    res = np.abs(y_cal - yhat_cal)
    pooled = _abs_quantile(res, alpha)
    q = {lab: _abs_quantile(res[lab_cal == lab], alpha) for lab in np.unique(lab_cal)}
    qt = np.array([q.get(lab, pooled) if np.isfinite(q.get(lab, pooled)) else pooled
                   for lab in lab_test])
    return yhat_test - qt, yhat_test + qt, lab_test, edges


@dataclass(frozen=True)
class RegimeMondrian(IntervalMethod):
    """Mondrian split conformal by regime (hour block x forecast tercile).

    ``extras["edges"]`` holds the two tercile edges from calibration.
    """

    name = "regime"

    def predict_interval(self, data: IntervalData) -> Intervals:
        """See :func:`mondrian`."""
        lo, hi, _, edges = mondrian(data.y_cal, data.yhat_cal, data.ts_cal, data.yhat_test,
                                    data.ts_test, data.alpha)
        return Intervals(lo, hi, {"edges": edges})
