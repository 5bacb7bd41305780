"""The two scikit-learn estimators the envelope wraps its fitted models in: :class:`NonNegative`
(a point model clipped at 0, :mod:`analytics.envelope.repair`'s first repair) and
:class:`Midpoint` (the stand-in median model of MAPIE's prefit CQR).

A module of their own because a class that subclasses scikit-learn's ``BaseEstimator`` needs
scikit-learn at import time (about 1.3 s of CPU with SciPy, issue 35): the rest of
:mod:`analytics.envelope` imports scikit-learn, LightGBM and MAPIE only where it fits, so a
command that reads a cached envelope, or the capacity decisions that repair a band, never pays
for them.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin


class NonNegative(RegressorMixin, BaseEstimator):
    """A fitted point model whose forecasts are clipped at 0 (scikit-learn prefit API).

    Parameters
    ----------
    model : fitted regressor with ``predict(X) -> ndarray (n,)``
    """

    def __init__(self, model=None):
        self.model = model
        self.fitted_ = True  # wraps an already fitted model (MAPIE's fitted check reads it)

    def fit(self, X, y):
        """Fit the wrapped model (used only when a caller refits)."""
        self.model.fit(X, y)
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return True

    def predict(self, X) -> np.ndarray:
        """``max(model.predict(X), 0)``, shape (n,), in the target's unit."""
        return np.maximum(np.asarray(self.model.predict(X), float), 0.0)


class Midpoint(RegressorMixin, BaseEstimator):
    """Stand-in for the median model of MAPIE's prefit CQR: ``(lower(X) + upper(X)) / 2``.

    MAPIE's split CQR takes three prefit models [alpha/2, 1 - alpha/2, 0.5]; its bounds are
    ``lower(X) - q_lo`` and ``upper(X) + q_hi`` with ``q`` from the conformity scores of the
    first two (mapie.regression.quantile_regression, ``_MapieQuantileRegressor.predict``), and
    the third model gives only the point prediction, which the envelope does not use. A
    midpoint saves a third 300-tree fit without changing any bound.
    """

    def __init__(self, lower=None, upper=None):
        self.lower = lower
        self.upper = upper
        self.fitted_ = True  # built from fitted models (MAPIE's fitted check reads it)

    def fit(self, X, y):
        """Nothing to fit (the two quantile models are already fitted)."""
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return True

    def predict(self, X) -> np.ndarray:
        """``(lower(X) + upper(X)) / 2``, shape (n,)."""
        return (self.lower.predict(X) + self.upper.predict(X)) / 2
