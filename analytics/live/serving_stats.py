"""Serving metrics per bin (issue 29 item 1): finished requests, queue and KV cache, and the
latency quantiles of what ran, from the engine's own series (:data:`analytics.live.source.
SERVING`), binned as the token counters are.

- ``requests``: the increase of the finished-requests counter in the bin (every
  ``finished_reason`` and instance summed; resets and gaps as :func:`analytics.live.bins.
  demand_bins` counts tokens; None in a gap).
- ``running_mean``, ``waiting_mean``, ``kv_cache_mean``, ``kv_cache_max``: the mean (max) of
  the gauge's samples taken in the bin ``(start, end]``, summed over instances at each sample
  time for the request gauges (a fleet's queue is the sum of its engines'), the mean of the
  instances for KV-cache usage (a fraction, 0-1); None without a sample.
- ``ttft_p50_s``, ``ttft_p95_s``, ``itl_p50_s``, ``itl_p95_s``, ``e2e_p50_s``, ``e2e_p95_s``:
  quantiles of the histogram's bucket increases in the bin (summed over instances per ``le``),
  by Prometheus' ``histogram_quantile`` rule (:func:`histogram_quantile`); None when no
  observation fell in the bin or a bucket series has a gap there. ITL is the inter-token
  latency (TBT), per output token.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from analytics.live.bins import demand_bins
from analytics.live.source import HISTOGRAMS, Series
from analytics.store.live import SERVING_COLUMNS

#: The quantiles reported per latency histogram, with their column suffix.
QUANTILES = ((0.5, "p50"), (0.95, "p95"))
#: Every column :func:`serving_bins` adds, in order (a stored bin's, migration 20).
COLUMNS = SERVING_COLUMNS


def histogram_quantile(q: float, upper: np.ndarray, counts: np.ndarray) -> float | None:
    """The ``q`` quantile of a histogram's observations (Prometheus' ``histogram_quantile``:
    linear interpolation inside the bucket that holds rank ``q x total``; the lowest bucket
    starts at 0 when its bound is positive; a rank in the ``+Inf`` bucket gives the highest
    finite bound).

    Parameters
    ----------
    q : the quantile, 0 <= q <= 1
    upper : bucket upper bounds (``le``), ascending, the last ``inf``; shape (k,)
    counts : cumulative observations per bucket (the ``_bucket`` values), shape (k,)

    Returns None when there is no observation (total 0) or no ``+Inf`` bucket.

    >>> histogram_quantile(0.5, np.array([1.0, 2.0, np.inf]), np.array([2.0, 6.0, 8.0]))
    1.5
    >>> histogram_quantile(0.99, np.array([1.0, 2.0, np.inf]), np.array([2.0, 6.0, 8.0]))
    2.0
    """
    upper, counts = np.asarray(upper, float), np.asarray(counts, float)
    if upper.size < 2 or not math.isinf(upper[-1]) or not counts[-1] > 0:
        return None
    counts = np.maximum.accumulate(counts)  # Prometheus fixes non-monotonic buckets this way
    rank = q * counts[-1]
    b = int(np.searchsorted(counts, rank, side="left"))
    b = min(b, upper.size - 1)
    if b == upper.size - 1:
        return float(upper[-2])
    lo = 0.0 if b == 0 else float(upper[b - 1])
    if b == 0 and upper[0] <= 0:
        return float(upper[0])
    below = 0.0 if b == 0 else float(counts[b - 1])
    in_bucket = float(counts[b]) - below
    if in_bucket <= 0:
        return float(upper[b])
    return float(lo + (float(upper[b]) - lo) * (rank - below) / in_bucket)


def _gauge(series: list[Series], first: int, n: int, bin_s: int, combine: str):
    """Per bin: (mean, max) of one gauge's samples in ``(start, end]``: each instance's mean
    over the bin, then those means summed (``sum``: requests running or queued on a fleet) or
    averaged (``mean``: KV-cache usage); the max of the instances' maxima. None without a
    sample (instances scraped at other moments need not line up)."""
    means, tops = np.full((len(series), n), np.nan), np.full((len(series), n), np.nan)
    for i, s in enumerate(series):
        t, v = np.asarray(s.ts_s, float), np.asarray(s.values, float)
        idx = (np.ceil((t - first) / bin_s) - 1).astype(np.int64)
        ok = (idx >= 0) & (idx < n) & np.isfinite(v)
        if not ok.any():
            continue
        g = pd.Series(v[ok]).groupby(idx[ok])
        means[i, g.mean().index] = g.mean().to_numpy()
        tops[i, g.max().index] = g.max().to_numpy()
    have = ~np.isnan(means).all(axis=0)
    known = (~np.isnan(means)).sum(axis=0)
    total = np.where(np.isnan(means), 0.0, means).sum(axis=0)
    comb = total if combine == "sum" else total / np.maximum(known, 1)
    top = np.where(np.isnan(tops), -np.inf, tops).max(axis=0, initial=-np.inf)
    return ([float(comb[b]) if have[b] else None for b in range(n)],
            [float(top[b]) if have[b] else None for b in range(n)])


def _counted(series: list[Series], start_s: float, end_s: float, bin_s: int) -> np.ndarray:
    """Per bin, the increase of the counters ``series`` summed (NaN in a gap), counted as
    :func:`analytics.live.bins.demand_bins` counts a prompt-token counter."""
    as_prompt = [replace(s, kind="prompt") for s in series]
    return demand_bins(as_prompt, start_s, end_s, bin_s, 1.0, 0.0)["target"].to_numpy(float)


def _quantiles(series: list[Series], start_s: float, end_s: float, bin_s: int, n: int):
    """Per quantile of :data:`QUANTILES`, the per-bin values of one histogram's buckets."""
    by_le: dict[float, list[Series]] = {}
    for s in series:
        le = dict(s.labels).get("le")
        try:
            bound = float(le)
        except (TypeError, ValueError):
            continue
        if math.isnan(bound) or bound == -math.inf:  # no bucket bound (float() reads "NaN")
            continue
        by_le.setdefault(bound, []).append(s)
    out = {tag: [None] * n for _, tag in QUANTILES}
    if not by_le or not math.isinf(max(by_le)):
        return out
    upper = np.array(sorted(by_le))
    counts = np.full((upper.size, n), np.nan)
    for i, bound in enumerate(upper):
        counts[i] = _counted(by_le[bound], start_s, end_s, bin_s)
    for b in range(n):
        col = counts[:, b]
        if np.isnan(col).any():
            continue
        for q, tag in QUANTILES:
            out[tag][b] = histogram_quantile(q, upper, col)
    return out


def serving_bins(series: list[Series], start_s: float, end_s: float,
                 bin_s: int) -> pd.DataFrame:
    """The bins ``[start_s, end_s)`` (epoch-aligned, ``bin_s`` wide, as
    :func:`analytics.live.bins.demand_bins`) of a model's serving series
    (:meth:`analytics.live.source.PrometheusSource.serving`, read from two bins before
    ``start_s``): ``ts`` and :data:`COLUMNS` (the module's docstring; None where unknown)."""
    first = int(np.floor(start_s / bin_s)) * bin_s
    last = int(np.ceil(end_s / bin_s)) * bin_s
    n = max((last - first) // bin_s, 0)
    kinds: dict[str, list[Series]] = {}
    for s in series:
        kinds.setdefault(s.kind, []).append(s)
    out = {"ts": pd.to_datetime(first + bin_s * np.arange(n), unit="s")}
    req = kinds.get("requests", [])
    out["requests"] = ([None if np.isnan(v) else float(v) for v in
                        _counted(req, start_s, end_s, bin_s)] if req else [None] * n)
    out["running_mean"] = _gauge(kinds.get("running", []), first, n, bin_s, "sum")[0]
    out["waiting_mean"] = _gauge(kinds.get("waiting", []), first, n, bin_s, "sum")[0]
    out["kv_cache_mean"], out["kv_cache_max"] = _gauge(kinds.get("kv_cache", []), first, n,
                                                       bin_s, "mean")
    for h in HISTOGRAMS:
        qs = _quantiles(kinds.get(h, []), start_s, end_s, bin_s, n)
        for _, tag in QUANTILES:
            out[f"{h}_{tag}_s"] = qs[tag]
    return pd.DataFrame(out)[["ts", *COLUMNS]]  # a column not in COLUMNS: KeyError
