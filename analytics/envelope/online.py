"""Online conformal intervals: rolling conformal and adaptive conformal inference (ACI).

Owns headroom's own vectorised loop :func:`online_conformal` and the two registered methods
built on it, :class:`RollingConformal` and :class:`ACI`. Their quantiles follow MAPIE's
``TimeSeriesRegressor`` exactly (signed residuals ``y - yhat``, lower bound at level
``alpha_t / 2`` and upper at ``1 - alpha_t / 2``, each with the finite-sample level
``ceil(level (n + 1)) / n`` and numpy ``method="lower"``; a level above 1 gives an infinite
bound), so on the same data they return MAPIE's intervals (tested) in far less time
(``bench/bench_conformal.py``).

One deliberate difference: ACI counts a miss when ``y_t`` is outside the *closed* interval
``[lower, upper]``, as Gibbs & Candes (2021, eq. 1-2) define ``err_t = 1{Y_t not in C_t}`` with
``C_t`` closed. MAPIE tests the open interval, so on perfectly constant (or perfectly predicted)
demand every zero-width interval counts as a miss, ``alpha_t`` is driven to 0 and the bounds
become infinite. On continuous data the two agree (ties have probability zero).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analytics.envelope.intervals import IntervalData, IntervalMethod, Intervals


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


def residuals(y: np.ndarray, yhat: np.ndarray) -> np.ndarray:
    """Signed conformity scores ``y - yhat``: the one definition of a residual that every
    rolling window reads (the rolling and ACI envelopes, and the capacity path through
    :func:`analytics.envelope.pipeline.residual_stream`).

    Returns ndarray of the shape of ``y``, in the target's unit.

    >>> residuals(np.array([5.0, 2.0]), np.array([3.0, 4.0])).tolist()
    [2.0, -2.0]
    """
    return np.asarray(y, float) - np.asarray(yhat, float)


def leave_one_out_bounds(yhat: np.ndarray, scores: np.ndarray, alpha: float
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-sample band on each calibration bin from the *other* calibration residuals.

    Bin ``t`` gets ``yhat[t] + [lower, upper]`` with the offsets of :func:`_signed_bounds`
    (MAPIE's finite-sample quantile rule, as the rolling window uses) over ``scores`` without
    ``scores[t]``: its own residual never widens its own band, so the band is out of sample
    while every bin is scored against a window of ``n - 1`` out-of-sample residuals, the size
    of the rolling window that follows on the test window. This is the jackknife (leave-one-out)
    form of split conformal with a fixed model (Barber, Candes, Ramdas & Tibshirani 2021, "Predictive
    inference with the jackknife+", Sec. 2), whose scores are exchangeable with a new bin's.

    Parameters
    ----------
    yhat : ndarray (n,), point forecast on the calibration bins
    scores : ndarray (n,), their signed residuals (:func:`residuals`), n >= 2
    alpha : miscoverage of the band

    Returns
    -------
    lo, hi : ndarray (n,), unrepaired (may be infinite when ``n - 1`` residuals are too few for
        ``alpha``, like the rolling window)

    Raises
    ------
    ValueError : fewer than 2 residuals, or shapes that differ
    """
    yhat, scores = np.asarray(yhat, float), np.asarray(scores, float)
    n = len(scores)
    if n < 2 or yhat.shape != scores.shape:
        raise ValueError("leave-one-out bounds need at least 2 residuals, one per forecast")
    order = np.sort(scores, kind="stable")
    pos = np.searchsorted(order, scores)  # where each bin's own residual sits (ties: equal)
    k = int(np.ceil((1 - alpha / 2) * n))  # level of _signed_bounds over n - 1 others
    if k > n - 1:
        return np.full(n, -np.inf), np.full(n, np.inf)
    j, m = k - 1, (n - 1) - 1 - (k - 1)  # upper / lower index among the n - 1 others

    def other(i: int) -> np.ndarray:  # i-th smallest of the others, per bin
        return np.where(i < pos, order[i], order[i + 1])

    return yhat + other(m), yhat + other(j)


class OnlineConformal:
    """The state of rolling conformal (``gamma = 0``) or ACI (``gamma > 0``) between bins: the
    window of signed residuals (a ring buffer with its sorted copy) and ``alpha_t``. One
    :meth:`interval` then one :meth:`observe` per bin, as the bins arrive (the live road) or
    over a whole test stream (:func:`online_conformal`: the same steps, so online and offline
    agree bin for bin). See :func:`online_conformal` for the parameters."""

    def __init__(self, init_scores: np.ndarray, alpha: float, gamma: float = 0.0,
                 floor: float | None = None):
        self.window = np.asarray(init_scores, float).copy()
        if self.window.size < 1:
            raise ValueError("online conformal needs at least one residual to start from")
        self.order = np.sort(self.window)
        self.alpha, self.gamma, self.floor = float(alpha), float(gamma), floor
        self.alpha_t = float(alpha)
        self.head = 0  # index of the oldest residual in the ring buffer

    def interval(self, yhat: float) -> tuple[float, float, float]:
        """``(lower, upper, alpha_t)`` for a bin forecast ``yhat`` (unclipped bounds)."""
        low_off, up_off = _signed_bounds(self.order, self.alpha_t)
        return yhat + low_off, yhat + up_off, self.alpha_t

    def observe(self, y: float, yhat: float, lower: float, upper: float) -> bool:
        """Take the bin's demand ``y``: update ``alpha_t`` (ACI, Gibbs & Candes 2021, eq. 2;
        clipped to [0, 1] as in MAPIE) and put ``y - yhat`` in place of the oldest residual.
        Returns whether ``y`` was outside the band as reported (closed; clipped at ``floor``)."""
        low, high = ((lower, upper) if self.floor is None
                     else (max(lower, self.floor), max(upper, self.floor)))
        err = not (low <= y <= high)  # closed: see the module doc
        if self.gamma:
            self.alpha_t = min(1.0, max(0.0, self.alpha_t + self.gamma * (self.alpha - err)))
        new, old = y - yhat, self.window[self.head]
        self.window[self.head] = new
        self.head = (self.head + 1) % len(self.window)
        # keep `order` sorted: drop one copy of `old`, insert `new`
        i = np.searchsorted(self.order, old)
        order = np.delete(self.order, i)
        self.order = np.insert(order, np.searchsorted(order, new), new)
        return err


def online_conformal(y: np.ndarray, yhat: np.ndarray, init_scores: np.ndarray, alpha: float,
                     gamma: float = 0.0, floor: float | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rolling conformal (``gamma = 0``) or ACI (``gamma > 0``) over a test stream.

    At step t the interval is ``yhat[t] + [lower, upper]`` from the signed residuals in the
    window (initially ``init_scores``, e.g. the calibration residuals); after ``y[t]`` arrives
    ``alpha_t`` is updated (ACI, Gibbs & Candes 2021, eq. 2; clipped to [0, 1] as in MAPIE) and
    the residual ``y[t] - yhat[t]`` replaces the oldest one in the window
    (:class:`OnlineConformal`, one step per bin).

    Parameters
    ----------
    y, yhat : ndarray of shape (n_test,)
    init_scores : ndarray of shape (n_window,), signed residuals ``y - yhat``
    alpha : target miscoverage
    gamma : ACI step size (0 = plain rolling conformal)
    floor : the least value ``y`` can take (0 for demand), or None. ACI then judges a miss on
        the band as it is reported, both bounds clipped at ``floor``
        (:func:`analytics.envelope.repair.repair_band`): a lower bound above a zero-demand bin
        is a miss, a negative one is not. The returned bounds are not clipped.

    Returns
    -------
    lo, hi : ndarray of shape (n_test,)
    alpha_path : ndarray of shape (n_test,), the ``alpha_t`` used at each step
    """
    y = np.asarray(y, float)
    yhat = np.asarray(yhat, float)
    state = OnlineConformal(init_scores, alpha, gamma, floor)
    lo, hi, path = np.empty(len(y)), np.empty(len(y)), np.empty(len(y))
    for t in range(len(y)):
        lo[t], hi[t], path[t] = state.interval(yhat[t])
        state.observe(y[t], yhat[t], lo[t], hi[t])
    return lo, hi, path


@dataclass(frozen=True)
class RollingConformal(IntervalMethod):
    """Split conformal whose calibration residuals are a trailing window (the calibration
    residuals first), updated as each true value arrives (envelopes paper: "rolling
    conformal")."""

    name = "rolling"

    def predict_interval(self, data: IntervalData) -> Intervals:
        """See :func:`online_conformal` with ``gamma = 0``."""
        lo, hi, _ = online_conformal(data.y_test, data.yhat_test,
                                     residuals(data.y_cal, data.yhat_cal), data.alpha, 0.0)
        return Intervals(lo, hi)


@dataclass(frozen=True)
class ACI(IntervalMethod):
    """Rolling conformal with adaptive miscoverage ``alpha_t`` (Gibbs & Candes 2021, eq. 2).

    Attributes
    ----------
    gamma : step size (Gibbs & Candes 2021 use 0.005)

    ``extras["alpha"]`` is the ``alpha_t`` path, ndarray of shape (n_test,).
    """

    name = "aci"
    gamma: float = 0.005

    @classmethod
    def from_params(cls, params) -> ACI:
        """ACI at the run's ``aci_gamma``."""
        return cls(gamma=params.aci_gamma)

    def predict_interval(self, data: IntervalData) -> Intervals:
        """See :func:`online_conformal`; misses are judged on the band clipped at 0 (demand is
        never negative), as it is reported."""
        lo, hi, path = online_conformal(data.y_test, data.yhat_test,
                                        residuals(data.y_cal, data.yhat_cal), data.alpha,
                                        self.gamma, floor=0.0)  # demand >= 0
        return Intervals(lo, hi, {"alpha": path})
