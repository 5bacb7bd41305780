"""Interval methods fitted once on the fit / calibration windows: direct LightGBM quantiles,
MAPIE split conformal and MAPIE conformalized quantile regression (CQR).

Direct quantile and CQR share their two LightGBM quantile models (:func:`quantile_model`,
memoised per run in :attr:`~analytics.envelope.intervals.IntervalData.fitted`): two fits per
envelope instead of five.

Owns :class:`DirectQuantile`, :class:`SplitConformal`, :class:`CQR` and their function forms
(also used by the cold-start experiment).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    from mapie.regression import SplitConformalRegressor

    scr = SplitConformalRegressor(model, confidence_level=1 - alpha, prefit=True)
    scr.conformalize(X_cal, y_cal)
    _, pis = scr.predict_interval(X_test)
    return pis[:, 0, 0], pis[:, 1, 0]


def _quantile_lgbm(seed: int):
    """An unfitted LightGBM quantile model (``lightgbm.LGBMRegressor``; imported here, where it
    is fitted)."""
    from lightgbm import LGBMRegressor

    return LGBMRegressor(objective="quantile", alpha=0.5, n_estimators=300, learning_rate=0.05,
                         num_leaves=31, n_jobs=1, random_state=seed, verbose=-1)


def quantile_model(X_fit, y_fit, level: float, seed: int = 0, fitted: dict | None = None
                   ):
    """The LightGBM quantile model at ``level`` fitted on ``(X_fit, y_fit)``, fitted once per
    ``fitted`` memo (the run's :attr:`IntervalData.fitted`): direct quantile and CQR read the
    same two models instead of fitting four.

    Parameters
    ----------
    X_fit, y_fit : (n_fit, n_features) and (n_fit,)
    level : quantile level in (0, 1)
    fitted : memo keyed by ``("lgbm_quantile", level, seed)``; None fits without memo
    """
    key = ("lgbm_quantile", float(level), int(seed))
    if fitted is not None and key in fitted:
        return fitted[key]
    model = _quantile_lgbm(seed).set_params(alpha=level).fit(X_fit, y_fit)
    if fitted is not None:
        fitted[key] = model
    return model


def cqr(X_fit, y_fit, X_cal, y_cal, X_test, alpha: float, seed: int = 0,
        fitted: dict | None = None):
    """MAPIE conformalized quantile regression with LightGBM (Romano, Patterson & Candes 2019).

    The quantile models at ``alpha/2`` and ``1 - alpha/2`` come from :func:`quantile_model`
    (shared with :func:`direct_quantile` through ``fitted``) and are conformalized by MAPIE's
    ``ConformalizedQuantileRegressor(prefit=True)`` on the calibration rows.

    Returns (lo, hi), each of shape (n_test,), in the target's unit.
    """
    lo_m = quantile_model(X_fit, y_fit, alpha / 2, seed, fitted)
    hi_m = quantile_model(X_fit, y_fit, 1 - alpha / 2, seed, fitted)
    from mapie.regression import ConformalizedQuantileRegressor

    from analytics.envelope.estimators import Midpoint

    reg = ConformalizedQuantileRegressor([lo_m, hi_m, Midpoint(lo_m, hi_m)],
                                         confidence_level=1 - alpha, prefit=True)
    reg.conformalize(X_cal, y_cal)
    _, pis = reg.predict_interval(X_test)
    return pis[:, 0, 0], pis[:, 1, 0]


def direct_quantile(X_fit, y_fit, X_test, alpha: float, seed: int = 0,
                    fitted: dict | None = None):
    """LightGBM quantile regression at ``alpha/2`` and ``1 - alpha/2`` (no calibration).

    Returns (lo, hi), each of shape (n_test,), as the two models predict them: the quantiles
    may cross on sparse data; :func:`analytics.envelope.repair.repair_band` sorts them per bin
    and counts the crossings (``repaired_crossing``). ``fitted``: see :func:`quantile_model`.
    """
    lo_m = quantile_model(X_fit, y_fit, alpha / 2, seed, fitted)
    hi_m = quantile_model(X_fit, y_fit, 1 - alpha / 2, seed, fitted)
    return lo_m.predict(X_test), hi_m.predict(X_test)


@dataclass(frozen=True)
class DirectQuantile(IntervalMethod):
    """LightGBM quantile loss at ``alpha/2`` and ``1 - alpha/2`` on the fit window (no
    calibration: the baseline conformal methods are measured against)."""

    name = "direct_quantile"

    def predict_interval(self, data: IntervalData) -> Intervals:
        """See :func:`direct_quantile`."""
        lo, hi = direct_quantile(data.X_fit, data.y_fit, data.X_test, data.alpha, data.seed,
                                 data.fitted)
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
                     data.seed, data.fitted)
        return Intervals(lo, hi)
