"""Means and 95 % t-intervals across replications, and verdicts stated with their uncertainty.

The interval of a mean of n replications is ``mean +- t(0.975, n-1) x sd / sqrt(n)`` (Student
t, ``scipy.stats.t``; sd with n-1 degrees of freedom); with fewer than two finite values it is
undefined (NaN). A verdict computed from such means is *distinguishable* only when it holds for
every value inside the bands (:func:`verdict`): a verdict that flips within the bands is
reported as ``"not distinguishable"``, not as true or false.
"""

from __future__ import annotations

import numpy as np

#: Reported when a verdict flips within the bands (or the bands are undefined).
NOT_DISTINGUISHABLE = "not distinguishable"


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float, int]:
    """``(mean, lo, hi, n)`` of the finite ``values``; lo / hi NaN when n < 2, all NaN when
    n = 0."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    if n == 0:
        return np.nan, np.nan, np.nan, 0
    mean = float(x.mean())
    if n < 2:
        return mean, np.nan, np.nan, 1
    from scipy import stats  # here: a worker process importing this package skips scipy

    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * x.std(ddof=1) / np.sqrt(n))
    return mean, mean - half, mean + half, n


def replicate_table(rows, by: list[str], metrics: list[str]):
    """One row per ``by`` group: each metric's mean, ``<metric>_lo95`` and ``<metric>_hi95``
    (the 95 % t-interval of the mean), plus ``replications`` (rows in the group). Groups keep
    their first-appearance order.

    Parameters
    ----------
    rows : pandas DataFrame, one row per task (replication)

    Returns
    -------
    pandas DataFrame
    """
    import pandas as pd  # here: worker processes import this package without pandas

    out = []
    for key, g in rows.groupby(by, sort=False, dropna=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        for m in metrics:
            mean, lo, hi, _ = mean_ci(pd.to_numeric(g[m], errors="coerce"))
            row.update({m: mean, f"{m}_lo95": lo, f"{m}_hi95": hi})
        row["replications"] = len(g)
        out.append(row)
    return pd.DataFrame(out)


def verdict(best: bool, worst: bool) -> bool | str:
    """True when the claim holds even at the band edges least favourable to it (``worst``),
    False when it fails even at the most favourable ones (``best``), else
    :data:`NOT_DISTINGUISHABLE`."""
    if worst:
        return True
    if not best:
        return False
    return NOT_DISTINGUISHABLE


def interior_below_ends(lo, hi) -> bool | str:
    """Some interior point below both ends (a U shape), judged within the bands ``lo``/``hi``
    (arrays in x order, length >= 3; NaN bands: not distinguishable)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    if lo.size < 3:
        return False
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        return NOT_DISTINGUISHABLE
    best = lo[1:-1].min() < min(hi[0], hi[-1])
    worst = hi[1:-1].min() < min(lo[0], lo[-1])
    return verdict(bool(best), bool(worst))


def interior_above_ends(lo, hi) -> bool | str:
    """Some interior point above both ends (a hump), judged within the bands ``lo``/``hi``."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    if lo.size < 3:
        return False
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        return NOT_DISTINGUISHABLE
    best = hi[1:-1].max() > max(lo[0], lo[-1])
    worst = lo[1:-1].max() > max(hi[0], hi[-1])
    return verdict(bool(best), bool(worst))
