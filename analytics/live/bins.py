"""Counter samples -> demand per bin, as a trace's grid counts it.

An engine's token counter at time ``T`` holds the tokens of every request counted before
``T``. The increase between two samples is ``v_i - v_{i-1}``, or ``v_i`` when the counter fell
(a reset: the engine restarted and counts from 0), as Prometheus' ``increase()`` treats a
reset, and it is credited to the bin holding ``t_i`` (no extrapolation to the bin edges, so
bins add up to the counted tokens exactly). Prompt and completion counters are weighted as a
trace's target is (:class:`analytics.config.Weights`, w = 1 / 1 by default) and every series of
the model (several engines, instances) is summed. A bin that some series has no sample in, or
whose series has no sample before it to count from, or that a scrape gap touches (a step
longer than :data:`analytics.config.GAP_STEPS` local scrape intervals,
:mod:`analytics.timegaps`: its increase cannot be placed in time), is a gap: its demand is
unknown (None, with the reason), never 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analytics.live.source import Series
from analytics.timegaps import logging_gaps


def increases(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-step increases of one counter (shape (n - 1,)) and where it reset (bool, same
    shape): ``v_i - v_{i-1}``, or ``v_i`` after a drop.

    >>> inc, reset = increases(np.array([5.0, 9.0, 2.0, 4.0]))
    >>> inc.tolist(), reset.tolist()
    ([4.0, 2.0, 2.0], [False, True, False])
    """
    v = np.asarray(values, float)
    d = np.diff(v)
    reset = d < 0
    return np.where(reset, v[1:], d), reset


def demand_bins(series: list[Series], start_s: float, end_s: float, bin_s: int,
                w_prompt: float = 1.0, w_completion: float = 1.0) -> pd.DataFrame:
    """The bins ``[start_s, end_s)`` (epoch-aligned, ``bin_s`` wide) of a model's counters.

    Parameters
    ----------
    series : the model's counter series (:meth:`PrometheusSource.counters`), read from before
        ``start_s`` (a sample at or before a bin's start is its baseline)
    start_s, end_s : the window (UNIX s), rounded out to whole bins
    bin_s : bin width (s)
    w_prompt, w_completion : token weights of the target

    Returns
    -------
    DataFrame, one row per bin: ``ts`` (bin start, naive UTC), ``prompt_tokens``,
    ``completion_tokens``, ``target`` (weighted; None in a gap), ``samples``, ``resets``,
    ``gap`` (bool) and ``gap_reason`` (None, or which series lacks samples there); its
    ``attrs["last_sample_s"]`` is the latest sample of any series (None without one).
    """
    first = int(np.floor(start_s / bin_s)) * bin_s
    last = int(np.ceil(end_s / bin_s)) * bin_s
    n = max((last - first) // bin_s, 0)
    prompt, completion = np.zeros(n), np.zeros(n)
    samples, resets = np.zeros(n, np.int64), np.zeros(n, np.int64)
    covered = np.ones(n, bool)
    seen = np.zeros(n, bool)  # some series covers the bin
    why: list[str | None] = [None] * n
    for s in series:
        ts = np.asarray(s.ts_s, float)
        inc, reset = increases(s.values)
        # the increase of step i (from t_{i-1} to t_i) belongs to the bin holding t_i - 0: the
        # bin (t_i - bin_s, t_i], by ceil - 1 (an epsilon below t_i is lost at UNIX-time scale)
        idx = (np.ceil((ts[1:] - first) / bin_s) - 1).astype(np.int64)
        ok = (idx >= 0) & (idx < n)
        target = prompt if s.kind == "prompt" else completion
        with np.errstate(over="ignore", invalid="ignore"):
            np.add.at(target, idx[ok], inc[ok])
        np.add.at(resets, idx[ok], reset[ok].astype(np.int64))
        np.add.at(samples, idx[ok], 1)
        have = np.zeros(n, bool)  # a sample in the bin, counted from one before it
        have[idx[ok]] = True
        # the series' own span: before its first sample it did not exist (an engine started
        # later counted nothing there), after its last it was gone; inside it, a bin without a
        # sample is a gap, and so is the bin it starts in when it starts after that bin's start
        lo = int(np.floor((ts[0] - first) / bin_s)) if ts.size else n
        hi = int(np.ceil((ts[-1] - first) / bin_s)) - 1 if ts.size else -1
        span = np.zeros(n, bool)
        span[max(lo, 0):max(min(hi + 1, n), 0)] = True
        seen[span | have] = True
        starts_inside = 0 <= lo < n and ts[0] > first + lo * bin_s
        ends_inside = 0 <= hi < n and ts[-1] < first + (hi + 1) * bin_s
        for b in np.flatnonzero(covered & span & ~have):
            covered[b] = False
            why[b] = f"no sample of {s.name}{dict(s.labels)} in this bin"
        # a scrape gap (a step over GAP_STEPS local scrape intervals): its increase cannot be
        # placed in time, so every bin the step touches is a gap
        steps = np.diff(ts)
        if steps.size:
            long_steps = np.flatnonzero(logging_gaps(steps))
            for i in long_steps:
                b0 = int(np.floor((ts[i] - first) / bin_s))
                b1 = int(np.ceil((ts[i + 1] - first) / bin_s)) - 1
                for b in range(max(b0, 0), min(b1, n - 1) + 1):
                    if covered[b]:
                        covered[b] = False
                        why[b] = (f"{s.name}{dict(s.labels)} has no sample for "
                                  f"{steps[i]:,.0f} s here (a scrape gap)")
        if starts_inside and covered[lo]:
            covered[lo] = False
            why[lo] = f"{s.name}{dict(s.labels)} starts inside this bin: its earlier tokens unknown"
        if ends_inside and covered[hi]:
            covered[hi] = False
            why[hi] = (f"{s.name}{dict(s.labels)} has no sample since {ts[-1]:.0f} (UNIX s), "
                       "inside this bin: its last tokens are not counted")
    for b in np.flatnonzero(~seen):
        covered[b] = False
        why[b] = "no counter series of this model covers this bin"
    with np.errstate(over="ignore", invalid="ignore"):
        target = w_prompt * prompt + w_completion * completion
    for b in np.flatnonzero(covered & ~np.isfinite(target)):  # a counter near float's limit
        covered[b] = False
        why[b] = "the counters' increase here is not a finite number (an overflowing counter)"
    out = pd.DataFrame({
        "ts": pd.to_datetime(first + bin_s * np.arange(n), unit="s"),
        "prompt_tokens": np.where(covered, prompt, np.nan),
        "completion_tokens": np.where(covered, completion, np.nan),
        "target": np.where(covered, target, np.nan), "samples": samples, "resets": resets,
        "gap": ~covered, "gap_reason": why})
    out.attrs["last_sample_s"] = max((float(s.ts_s[-1]) for s in series if len(s.ts_s)),
                                     default=None)
    return out


def power_energy_bins(series: list[Series], start_s: float, end_s: float,
                      bin_s: int) -> tuple[np.ndarray, list[str | None]]:
    """Energy (J) per bin ``[start_s, end_s)`` of GPUs that report power, not energy: each
    GPU's power samples (W) integrated over the bin ``(start, end]`` with the power linear
    between samples (the trapezoid rule; the bin's edges interpolated), summed over the GPUs.

    A bin is unknown (NaN, with the reason) when a GPU has no sample at or before its start or
    at or after its end (its power there is not measured) or a scrape gap touches it (a step
    over :data:`analytics.config.GAP_STEPS` local intervals, :mod:`analytics.timegaps`).

    Returns ``(energy_j, reasons)``, shapes (n,) and n.

    >>> s = Series("p", "prompt", (), np.array([0.0, 150.0, 300.0]), np.array([100.0, 300, 100]))
    >>> power_energy_bins([s], 0, 300, 300)[0].tolist()  # (100+300)/2*150 + (300+100)/2*150
    [60000.0]
    """
    first = int(np.floor(start_s / bin_s)) * bin_s
    last = int(np.ceil(end_s / bin_s)) * bin_s
    n = max((last - first) // bin_s, 0)
    edges = first + bin_s * np.arange(n + 1, dtype=float)
    total = np.zeros(n)
    why: list[str | None] = [None] * n
    if not series:
        return np.full(n, np.nan), ["no power series of these GPUs"] * n
    for s in series:
        t, p = np.asarray(s.ts_s, float), np.asarray(s.values, float)
        bad = _unusable_power(t, p)
        if bad is not None:
            for b in range(n):
                why[b] = why[b] or f"{s.name}{dict(s.labels)}: {bad}"
            continue
        if t.size < 2:
            for b in range(n):
                why[b] = why[b] or f"{s.name}{dict(s.labels)} has fewer than two samples"
            continue
        # energy from the first sample to each sample (trapezoids), then to each edge
        cum = np.concatenate([[0.0], np.cumsum(np.diff(t) * (p[1:] + p[:-1]) / 2)])
        k = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, t.size - 2)
        p_edge = np.interp(edges, t, p)
        e_edge = cum[k] + (edges - t[k]) * (p[k] + p_edge) / 2
        total += np.diff(e_edge)
        gaps = np.flatnonzero(logging_gaps(np.diff(t)))
        for b in range(n):
            lo, hi = edges[b], edges[b + 1]
            if t[0] > lo or t[-1] < hi:
                why[b] = why[b] or f"{s.name}{dict(s.labels)} has no power sample before " \
                    "or after this bin"
            elif any(t[i] < hi and t[i + 1] > lo for i in gaps):
                why[b] = why[b] or f"{s.name}{dict(s.labels)} has a scrape gap in this bin"
    energy = np.where([w is None for w in why], total, np.nan)
    for b in np.flatnonzero(~np.isfinite(energy)):
        why[b] = why[b] or "the power samples are too large to integrate"
    energy[~np.isfinite(energy)] = np.nan
    return energy, why


#: The most power one GPU's gauge may read, W (a B200 module is rated 1,000 W): a larger value
#: is no power reading.
MAX_GPU_POWER_W = 1e5


def _unusable_power(t: np.ndarray, p: np.ndarray) -> str | None:
    """Why one GPU's power samples cannot be integrated (None: they can): times out of order
    or repeated, a value that is not a finite power between 0 and :data:`MAX_GPU_POWER_W`."""
    if t.size and not np.all(np.isfinite(t)):
        return "a sample time is not a finite number"
    if t.size > 1 and not np.all(np.diff(t) > 0):
        return "its sample times are not strictly increasing (out of order or repeated)"
    if p.size and not np.all(np.isfinite(p) & (p >= 0) & (p <= MAX_GPU_POWER_W)):
        return f"a power sample is not a finite number of watts in [0, {MAX_GPU_POWER_W:g}]"
    return None
