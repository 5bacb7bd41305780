"""Demand is never negative: the repairs that make every forecast row satisfy
``0 <= lower <= point <= upper``, and the counts of each repair.

Owns :func:`clip_points` (the point-model columns of a run), :func:`repair_band` (one interval
method's band) and :data:`REPAIR_COLUMNS` (the diagnostic that
:attr:`analytics.envelope.pipeline.EnvelopeResult.repairs` carries); the fitted point model
whose forecasts are clipped at 0 is :class:`analytics.envelope.estimators.NonNegative`.

The repairs, in order, and why each is honest:

1. **Point forecasts are clipped at 0** (``max(yhat, 0)``). Demand (tokens, requests,
   GPU-seconds per bin) is never negative, so a negative forecast is never better than 0: the
   absolute error of the clipped forecast is never larger. The residual-based interval methods
   (split, rolling, ACI, regime) are calibrated on the residuals of the *clipped* model: the
   clipped model is a fixed function of the fitted one, so their coverage guarantee (Lei et al.
   2018, Thm. 2.2; Gibbs & Candes 2021) holds for it unchanged.
2. **Crossed bounds are sorted** per bin (``lower, upper = min, max``). Quantile models fitted
   separately at ``alpha/2`` and ``1 - alpha/2`` (direct quantile, CQR) can cross on sparse data
   (Chernozhukov, Fernandez-Val & Galichon 2010, "Quantile and probability curves without
   crossing": sorting never makes the quantile estimates worse).
3. **Both bounds are clipped at 0**: a negative lower bound carries no information about a
   nonnegative demand (coverage unchanged); an upper bound below 0 becomes 0 (it can only gain
   coverage of zero-demand bins).
4. **A point outside the band extends the band to the point** and is counted. A band that is
   symmetric around the point (split and regime: absolute residuals) contains it by
   construction after 1-3; a band from signed-residual quantiles (rolling, ACI: on zero-heavy
   demand most residuals of a nonnegative forecast can be negative, so the upper offset can be
   too) or from separately fitted quantile models (direct quantile, CQR) need not contain the
   base model's point forecast. Extending makes the band only wider, so it never loses
   coverage; the count (``point_outside_band``) says how often the point and the band
   disagreed.

Coverage, width and interval score are measured on the repaired band.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: columns of the repair diagnostic, one row per point model and per interval method
REPAIR_COLUMNS = ("kind", "method", "bins", "repaired_negative_point", "repaired_negative_lower",
                  "repaired_negative_upper", "repaired_crossing", "point_outside_band")


def clip_points(preds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[dict]]:
    """Clip every point model's forecasts at 0 and count the clipped bins.

    Parameters
    ----------
    preds : model name -> ndarray (n_bins,), NaN where a model cannot forecast

    Returns
    -------
    clipped : same keys, negative values replaced by 0 (NaN kept)
    rows : one diagnostic row per model (``kind`` = ``"point"``, columns
        :data:`REPAIR_COLUMNS`); ``bins`` counts the bins the model forecasts
    """
    clipped, rows = {}, []
    for name, values in preds.items():
        values = np.asarray(values, float)
        negative = values < 0  # NaN compares False
        clipped[name] = np.where(negative, 0.0, values)
        rows.append({"kind": "point", "method": name, "bins": int(np.isfinite(values).sum()),
                     "repaired_negative_point": int(negative.sum()),
                     "repaired_negative_lower": 0, "repaired_negative_upper": 0,
                     "repaired_crossing": 0, "point_outside_band": 0})
    return clipped, rows


def repair_band(point: np.ndarray, lower: np.ndarray, upper: np.ndarray, raw_point: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, dict]:
    """Repair one method's band so that ``0 <= lower <= point <= upper`` on every bin.

    Parameters
    ----------
    point : ndarray (n_test,), the clipped (nonnegative) point forecast the row shows
    lower, upper : ndarray (n_test,), the method's raw bounds (may be infinite)
    raw_point : ndarray (n_test,), the point forecast before clipping (for the count)

    Returns
    -------
    lower, upper : repaired bounds, shape (n_test,)
    counts : ``repaired_negative_point`` (bins whose point was clipped), ``repaired_crossing``
        (``lower > upper``, sorted), ``repaired_negative_lower`` / ``repaired_negative_upper``
        (bounds below 0 after sorting, clipped), ``point_outside_band`` (bins whose band was
        extended to the point), ``bins``

    Raises
    ------
    ValueError : arrays of different lengths, or a negative ``point``
    """
    point, lower, upper = (np.asarray(a, float) for a in (point, lower, upper))
    if not len(point) == len(lower) == len(upper) == len(raw_point):
        raise ValueError("point, lower and upper must have one value per test bin")
    if (point < 0).any():
        raise ValueError("repair_band needs the clipped (nonnegative) point forecast")
    crossing = lower > upper
    lower, upper = np.minimum(lower, upper), np.maximum(lower, upper)
    neg_lower, neg_upper = lower < 0, upper < 0
    lower, upper = np.maximum(lower, 0.0), np.maximum(upper, 0.0)
    outside = (point < lower) | (point > upper)
    lower, upper = np.minimum(lower, point), np.maximum(upper, point)
    counts = {"bins": int(len(point)),
              "repaired_negative_point": int((np.asarray(raw_point, float) < 0).sum()),
              "repaired_negative_lower": int(neg_lower.sum()),
              "repaired_negative_upper": int(neg_upper.sum()),
              "repaired_crossing": int(crossing.sum()),
              "point_outside_band": int(outside.sum())}
    return lower, upper, counts


def repairs_frame(rows: list[dict]) -> pd.DataFrame:
    """The diagnostic as a DataFrame with columns :data:`REPAIR_COLUMNS` (ints but
    ``kind`` / ``method``)."""
    return pd.DataFrame(rows, columns=list(REPAIR_COLUMNS))
