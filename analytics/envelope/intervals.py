"""The interval-method protocol: what every prediction-interval method takes and returns.

Every method is a small (frozen dataclass) subclass of :class:`IntervalMethod` with ONE call,
:meth:`IntervalMethod.predict_interval`, in the shape of MAPIE's fit -> conformalize ->
predict_interval: it gets an :class:`IntervalData` (fit, calibration and test windows plus the
prefit point model) and returns :class:`Intervals` (lower and upper bound per test bin, in the
target's unit, plus method-specific extras). :mod:`analytics.envelope.registry` lists the
methods by name and :func:`analytics.envelope.pipeline.run_envelope` loops over it.

Methods at miscoverage ``alpha`` (nominal coverage ``1 - alpha``):

==================  ============================================================================
method              how
==================  ============================================================================
direct_quantile     LightGBM quantile loss at ``alpha/2`` and ``1 - alpha/2``, fit on the fit
                    window, no calibration (:mod:`~analytics.envelope.conformal_methods`)
split               MAPIE ``SplitConformalRegressor`` (absolute residual) on the calibration
                    window around the prefit point model (Vovk et al. 2005; Lei et al. 2018)
cqr                 MAPIE ``ConformalizedQuantileRegressor`` with LightGBM quantile models
                    (Romano, Patterson & Candes 2019)
rolling             split conformal whose calibration residuals are a trailing window, updated
                    as each true value arrives (envelopes paper: "rolling conformal";
                    :mod:`~analytics.envelope.online`)
aci                 rolling + adaptive miscoverage ``alpha_t`` (Gibbs & Candes 2021):
                    ``alpha_{t+1} = alpha_t + gamma (alpha - err_t)``
regime              Mondrian split conformal: one residual quantile per regime, regime =
                    hour-of-day block (00-06, 06-12, 12-18, 18-24 UTC) x tercile of the point
                    forecast (tercile edges from the calibration window;
                    :mod:`~analytics.envelope.mondrian`)
==================  ============================================================================

Adding a method: write one subclass of :class:`IntervalMethod` (a ``name`` and
``predict_interval``; override ``from_params`` if it has a knob of
:class:`~analytics.envelope.pipeline.EnvelopeParams`) and register it in
:mod:`analytics.envelope.registry`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Intervals:
    """Prediction intervals on the test window.

    Attributes
    ----------
    lower, upper : ndarray of shape (n_test,), in the target's unit; may be infinite (a
        conformal quantile level above 1 gives an unbounded interval)
    extras : method-specific outputs, e.g. ACI's ``alpha`` path (ndarray (n_test,)) or the
        regime method's tercile ``edges``; a 1-D ndarray of length n_test becomes the column
        ``<method>_<key>`` of :attr:`analytics.envelope.pipeline.EnvelopeResult.test`
    """

    lower: np.ndarray
    upper: np.ndarray
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class IntervalData:
    """Everything an interval method may use, cut into chronological windows.

    Attributes
    ----------
    alpha : target miscoverage in (0, 1)
    seed : random seed of any model the method fits
    model : the prefit point model (scikit-learn API) the residual-based methods wrap
    X_fit, y_fit : ndarray (n_fit, n_features) and (n_fit,), fit-window rows with full features
    X_cal, y_cal, yhat_cal : calibration window: features, demand, point forecast
    ts_cal : calibration bin start times, shape (n_cal,)
    X_test, y_test, yhat_test : test window; online methods read ``y_test[t]`` only after
        predicting bin ``t``
    ts_test : test bin start times, shape (n_test,)
    fitted : per-run memo of models fitted on the fit window, shared by the methods of one run
        so that each distinct model is fitted once (e.g. the LightGBM quantile models at
        ``alpha/2`` and ``1 - alpha/2`` used by both ``direct_quantile`` and ``cqr``); keyed by
        a tuple naming the model and its level. Not compared, not shown.
    """

    alpha: float
    seed: int
    model: Any
    X_fit: np.ndarray
    y_fit: np.ndarray
    X_cal: np.ndarray
    y_cal: np.ndarray
    yhat_cal: np.ndarray
    ts_cal: pd.Series
    X_test: np.ndarray
    y_test: np.ndarray
    yhat_test: np.ndarray
    ts_test: pd.Series
    fitted: dict = field(default_factory=dict, compare=False, repr=False)


class IntervalMethod(ABC):
    """One prediction-interval method (subclasses are frozen dataclasses of their knobs)."""

    #: registry key and the ``<name>_lo`` / ``<name>_hi`` column prefix
    name: ClassVar[str]

    @classmethod
    def from_params(cls, params) -> IntervalMethod:
        """The method configured from :class:`analytics.envelope.pipeline.EnvelopeParams`
        (default: a method without knobs ignores them)."""
        return cls()

    @abstractmethod
    def predict_interval(self, data: IntervalData) -> Intervals:
        """Fit what the method needs, conformalize on calibration, bound every test bin.

        Returns :class:`Intervals` with ``lower`` and ``upper`` of shape (n_test,).
        """
