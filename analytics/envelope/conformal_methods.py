"""Interval methods fitted once on the fit / calibration windows: direct LightGBM quantiles,
MAPIE split conformal and MAPIE conformalized quantile regression (CQR).

Owns :class:`DirectQuantile`, :class:`SplitConformal`, :class:`CQR` and their function forms
(also used by the cold-start experiment).
"""

from __future__ import annotations

from dataclasses import dataclass

from lightgbm import LGBMRegressor
from mapie.regression import ConformalizedQuantileRegressor, SplitConformalRegressor

from analytics.envelope.intervals import IntervalData, IntervalMethod, Intervals


def split_conformal(model, X_cal, y_cal, X_test, alpha: float):
    """MAPIE split conformal around a prefit point model (absolute residual score; Vovk et al.
    2005; Lei et al. 2018).

    Parameters
    ----------
    model : prefit point model
    X_cal, y_cal : calibration rows, (n_cal, n_features) and (n_cal,)
    X_test : (n_test, n_features)

    Returns (lo, hi), each of shape (n_test,), in the target's unit.
    """
    scr = SplitConformalRegressor(model, confidence_level=1 - alpha, prefit=True)
    scr.conformalize(X_cal, y_cal)
    _, pis = scr.predict_interval(X_test)
    return pis[:, 0, 0], pis[:, 1, 0]


def _quantile_lgbm(seed: int) -> LGBMRegressor:
    return LGBMRegressor(objective="quantile", alpha=0.5, n_estimators=300, learning_rate=0.05,
                         num_leaves=31, n_jobs=2, random_state=seed, verbose=-1)


def cqr(X_fit, y_fit, X_cal, y_cal, X_test, alpha: float, seed: int = 0):
    """MAPIE conformalized quantile regression with LightGBM (Romano, Patterson & Candes 2019).

    Returns (lo, hi), each of shape (n_test,), in the target's unit.
    """
    reg = ConformalizedQuantileRegressor(_quantile_lgbm(seed), confidence_level=1 - alpha)
    reg.fit(X_fit, y_fit).conformalize(X_cal, y_cal)
    _, pis = reg.predict_interval(X_test)
    return pis[:, 0, 0], pis[:, 1, 0]


def direct_quantile(X_fit, y_fit, X_test, alpha: float, seed: int = 0):
    """LightGBM quantile regression at ``alpha/2`` and ``1 - alpha/2`` (no calibration).

    Returns (lo, hi), each of shape (n_test,), as the two models predict them: the quantiles
    may cross on sparse data; :func:`analytics.envelope.repair.repair_band` sorts them per bin
    and counts the crossings (``repaired_crossing``).
    """
    lo_m = _quantile_lgbm(seed).set_params(alpha=alpha / 2).fit(X_fit, y_fit)
    hi_m = _quantile_lgbm(seed).set_params(alpha=1 - alpha / 2).fit(X_fit, y_fit)
    lo, hi = lo_m.predict(X_test), hi_m.predict(X_test)
    return lo, hi


@dataclass(frozen=True)
class DirectQuantile(IntervalMethod):
    """LightGBM quantile loss at ``alpha/2`` and ``1 - alpha/2`` on the fit window (no
    calibration: the baseline conformal methods are measured against)."""

    name = "direct_quantile"

    def predict_interval(self, data: IntervalData) -> Intervals:
        """See :func:`direct_quantile`."""
        lo, hi = direct_quantile(data.X_fit, data.y_fit, data.X_test, data.alpha, data.seed)
        return Intervals(lo, hi)


@dataclass(frozen=True)
class SplitConformal(IntervalMethod):
    """MAPIE split conformal around the prefit point model, calibrated once."""

    name = "split"

    def predict_interval(self, data: IntervalData) -> Intervals:
        """See :func:`split_conformal`."""
        lo, hi = split_conformal(data.model, data.X_cal, data.y_cal, data.X_test, data.alpha)
        return Intervals(lo, hi)


@dataclass(frozen=True)
class CQR(IntervalMethod):
    """MAPIE conformalized quantile regression (LightGBM quantile models on the fit window)."""

    name = "cqr"

    def predict_interval(self, data: IntervalData) -> Intervals:
        """See :func:`cqr`."""
        lo, hi = cqr(data.X_fit, data.y_fit, data.X_cal, data.y_cal, data.X_test, data.alpha,
                     data.seed)
        return Intervals(lo, hi)
