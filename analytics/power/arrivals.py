"""The batch arrival generator of the hybrid power paper (Methods, "Batch job arrivals"): Ward
clustering of jobs on (log GPU count, log GPU-hours) into three resource groups; per group a
negative-binomial daily count and a logistic-normal hourly profile (additive log-ratio, diagonal
covariance) calibrated to the pooled hourly histogram and the spread of the daily centre of mass.
Owns :class:`GroupModel`, :class:`ArrivalModel`, :func:`resource_groups` and
:func:`fit_arrival_model`; :mod:`analytics.power.jobs` draws scenarios from the fitted model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

GROUP_NAMES = ("low", "medium", "high")
DAY_S = 86_400.0  # seconds per day


@dataclass(frozen=True)
class GroupModel:
    """Arrival model of one resource group.

    Attributes
    ----------
    name : ``low`` / ``medium`` / ``high`` (by mean log GPU-hours)
    gpu_milli, runtime_s : ndarrays of shape (n_jobs,): the group's observed jobs (resampled in
        pairs when generating)
    daily_mean, daily_var : moments of the daily arrival count over the fitted days
    ref_hour : reference hour of the additive log-ratio (largest mean share)
    alr_mean, alr_var : ndarrays of shape (23,): mean and diagonal variance of the ALR vector
        after calibration
    hourly_obs : ndarray of shape (24,): pooled observed hourly histogram (shares)
    com_sd_obs_h, com_sd_fit_h : sd of the daily centre of mass of arrivals (hours), observed and
        reproduced by the calibrated model
    """

    name: str
    gpu_milli: np.ndarray
    runtime_s: np.ndarray
    daily_mean: float
    daily_var: float
    ref_hour: int
    alr_mean: np.ndarray
    alr_var: np.ndarray
    hourly_obs: np.ndarray
    com_sd_obs_h: float
    com_sd_fit_h: float


@dataclass(frozen=True)
class ArrivalModel:
    """Fitted batch arrival generator: resource groups plus where they came from."""

    groups: tuple[GroupModel, ...]
    days: int
    jobs: int
    clock_offset_h: float
    window: tuple[str, str]

    def offered_gpus(self, max_runtime_s: float = math.inf) -> float:
        """Mean offered batch load of the fitted trace in GPUs: sum over groups of daily arrivals
        times mean GPU-seconds per job (runtimes capped at ``max_runtime_s``), over a day."""
        return sum(g.daily_mean * float(np.mean(g.gpu_milli / 1000.0
                                                * np.minimum(g.runtime_s, max_runtime_s)))
                   for g in self.groups if g.gpu_milli.size) / DAY_S

    def summary(self) -> list[dict]:
        """One dict per group: jobs, GPU and runtime medians, daily mean, peak hour, CoM sd."""
        return [{"group": g.name, "jobs": int(g.gpu_milli.size),
                 "median_gpus": float(np.median(g.gpu_milli) / 1000),
                 "median_runtime_h": float(np.median(g.runtime_s) / 3600),
                 "median_gpu_hours": float(np.median(g.gpu_milli * g.runtime_s) / 3.6e6),
                 "daily_mean": round(g.daily_mean, 3), "daily_var": round(g.daily_var, 3),
                 "peak_hour": int(np.argmax(g.hourly_obs)),
                 "com_sd_obs_h": round(g.com_sd_obs_h, 3),
                 "com_sd_fit_h": round(g.com_sd_fit_h, 3)} for g in self.groups]


def resource_groups(gpu_milli: np.ndarray, runtime_s: np.ndarray, k: int = 3) -> np.ndarray:
    """Ward clustering of jobs on (log GPU count, log GPU-hours) into ``k`` resource groups.

    The paper clusters unique (GPU count, time limit) combinations; the ``jobs`` table has no time
    limit, so the realised runtime stands in. Unique combinations are taken after rounding both
    logs to 0.05 (coarser if more than 2,000 remain, to bound Ward's O(n^2) memory).

    Parameters
    ----------
    gpu_milli : ndarray of shape (n,), thousandths of a GPU per job (> 0)
    runtime_s : ndarray of shape (n,), seconds (> 0)

    Returns
    -------
    ndarray of shape (n,) of int labels 0..k-1 ordered by mean log GPU-hours (0 = low).

    >>> g = np.array([1000, 1000, 1000, 8000, 8000, 16000])
    >>> r = np.array([60, 90, 70, 36000, 40000, 400000.0])
    >>> resource_groups(g, r).tolist()
    [0, 0, 0, 1, 1, 2]
    """
    from scipy.cluster.hierarchy import fcluster, linkage  # heavy; only the fit needs it

    x = np.log(np.asarray(gpu_milli, float) / 1000.0)
    y = np.log(np.asarray(gpu_milli, float) / 1000.0 * np.asarray(runtime_s, float) / 3600.0)
    for step in (0.05, 0.1, 0.2, 0.5, 1.0):
        pts = np.column_stack([np.round(x / step), np.round(y / step)]) * step
        uniq, inverse = np.unique(pts, axis=0, return_inverse=True)
        if len(uniq) <= 2000:
            break
    inverse = inverse.ravel()
    if len(uniq) <= k:
        labels_u = np.arange(len(uniq))
    else:
        labels_u = fcluster(linkage(uniq, method="ward"), t=k, criterion="maxclust") - 1
    labels = labels_u[inverse]
    order = sorted(set(labels.tolist()), key=lambda lab: y[labels == lab].mean())
    remap = {old: new for new, old in enumerate(order)}
    return np.array([remap[v] for v in labels.tolist()], dtype=np.int64)


def alr_inverse(z: np.ndarray, ref: int) -> np.ndarray:
    """Inverse additive log-ratio (the logistic-normal hourly profile of the hybrid power paper,
    Methods, "Batch job arrivals").

    Parameters
    ----------
    z : ndarray of shape (..., 23), log-ratios of each hour to the reference hour
    ref : the reference hour (its log-ratio is 0), 0..23

    Returns
    -------
    ndarray of shape (..., 24): hourly shares, each row summing to 1.

    >>> alr_inverse(np.zeros(23), 0).round(4).tolist() == [round(1 / 24, 4)] * 24
    True
    """
    full = np.insert(z, ref, 0.0, axis=-1)
    full = full - full.max(axis=-1, keepdims=True)
    e = np.exp(full)
    return e / e.sum(axis=-1, keepdims=True)


def _simulate_days(alr_mean, alr_sd, ref, counts, normals, uniforms):
    """Hour of every simulated arrival for days with the given counts (common random numbers).

    normals : (n_days, 23) standard normals; uniforms : (sum(counts),) uniforms in [0, 1).
    Returns (hours, day_index) of the arrivals.
    """
    w = alr_inverse(alr_mean + normals * alr_sd, ref)
    cum = np.cumsum(w, axis=1)
    cum[:, -1] = 1.0
    day = np.repeat(np.arange(len(counts)), counts)
    flat = (cum + np.arange(len(counts))[:, None]).ravel()
    pos = np.searchsorted(flat, uniforms + day, side="right")
    hours = np.minimum(pos - day * 24, 23)
    return hours, day


def _com_sd(hours: np.ndarray, day: np.ndarray, n_days: int) -> float:
    """sd over days of the mean arrival hour (hour + 0.5), days with arrivals only."""
    n = np.bincount(day, minlength=n_days)
    s = np.bincount(day, weights=hours + 0.5, minlength=n_days)
    ok = n > 0
    return float(np.std(s[ok] / n[ok])) if ok.sum() > 1 else 0.0


def _fit_group(name, sub_milli, sub_runtime, hour_counts, shrink, rng, reps) -> GroupModel:
    """Fit one group's daily count moments and calibrated logistic-normal hourly profile."""
    daily = hour_counts.sum(axis=1)
    pooled = hour_counts.sum(axis=0) / max(daily.sum(), 1)
    active = hour_counts[daily > 0]
    n_act = daily[daily > 0]
    if len(active) == 0:
        flat = np.zeros(23)
        return GroupModel(name, sub_milli, sub_runtime, 0.0, 0.0, 0, flat, flat,
                          np.full(24, 1 / 24), 0.0, 0.0)
    w = (active + shrink) / (n_act[:, None] + 24 * shrink)
    ref = int(np.argmax(w.mean(axis=0)))
    z = np.log(np.delete(w, ref, axis=1) / w[:, [ref]])
    mu = z.mean(axis=0)
    var = z.var(axis=0, ddof=1) if len(z) > 1 else np.zeros(23)
    hours_obs = np.repeat(np.tile(np.arange(24), len(active)), active.ravel())
    day_obs = np.repeat(np.arange(len(active)), active.sum(axis=1))
    com_obs = _com_sd(hours_obs, day_obs, len(active))

    # calibration (paper: mean and diagonal covariance tuned so that the model reproduces the
    # pooled hourly histogram and the sd of the daily centre of mass): simulate the observed days'
    # counts ``reps`` times with common random numbers; scale the variance by kappa (bisection on
    # the centre-of-mass sd) and shift the mean by the log-ratio of observed to simulated pooled
    # shares (fixed point), alternating three times.
    counts = np.tile(n_act, reps)
    normals = rng.standard_normal((len(counts), 23))
    uniforms = rng.random(int(counts.sum()))
    normals_w = rng.standard_normal((8000, 23))
    target = np.maximum(pooled, 1e-6)

    def run(m, kappa):
        return _simulate_days(m, np.sqrt(kappa * var), ref, counts, normals, uniforms)

    kappa, m = 1.0, mu.copy()

    def fit_mean(m, kappa):
        # the model's pooled histogram is E[w] (daily counts are drawn independently of the
        # composition), estimated from the common normals without multinomial noise
        for _ in range(8):
            sim = np.maximum(alr_inverse(m + normals_w * np.sqrt(kappa * var), ref)
                             .mean(axis=0), 1e-6)
            adj = np.log(target / sim)
            m = m + np.delete(adj - adj[ref], ref)
        return m

    for _ in range(4):
        m = fit_mean(m, kappa)
        if var.sum() > 0:
            lo, hi = -8.0, 4.0  # log kappa
            f_lo = _com_sd(*run(m, math.exp(lo)), len(counts))
            f_hi = _com_sd(*run(m, math.exp(hi)), len(counts))
            if com_obs <= f_lo:
                kappa = math.exp(lo)
            elif com_obs >= f_hi:
                kappa = math.exp(hi)
            else:
                for _ in range(22):
                    mid = (lo + hi) / 2
                    if _com_sd(*run(m, math.exp(mid)), len(counts)) < com_obs:
                        lo = mid
                    else:
                        hi = mid
                kappa = math.exp((lo + hi) / 2)
    m = fit_mean(m, kappa)
    sd_fit = _com_sd(*run(m, kappa), len(counts))
    return GroupModel(name, sub_milli, sub_runtime, float(daily.mean()),
                      float(daily.var(ddof=1)) if len(daily) > 1 else 0.0, ref, m, kappa * var,
                      pooled, com_obs, sd_fit)


def fit_arrival_model(jobs: pd.DataFrame, rng: np.random.Generator, clock_offset_h: float = 0.0,
                      shrink: float = 0.5, reps: int = 10) -> ArrivalModel:
    """Fit the paper's batch arrival generator to a job trace.

    Parameters
    ----------
    jobs : frame of GPU jobs that ran, as :func:`analytics.store.gpu_jobs` returns: ``submit_ts``
        (UTC), ``gpu_milli`` (thousandths of a GPU) and ``runtime_s``
    rng : generator for the calibration's Monte Carlo
    clock_offset_h : hours added to UTC to get the site's clock (MIT SuperCloud, Boston in
        January-March: -5), so hourly profiles are in local time
    shrink : pseudo-count added to every hour before normalising (the paper's "small uniform
        shrinkage" that avoids zero components)
    reps : Monte Carlo replicates of the observed days in the calibration

    Returns
    -------
    ArrivalModel with three :class:`GroupModel` (fewer if the trace has fewer distinct jobs).

    Notes
    -----
    Days fitted: the whole days between the 1st and 99th percentile of submit times, so a
    trace's sparse lead-in (the openb list has ~30 pods in its first 115 days) does not pass for
    quiet days. Daily counts are summarised by mean and variance (negative binomial when
    overdispersed, see :func:`generate_jobs`).

    Raises
    ------
    ValueError
        Fewer than 10 GPU jobs.
    """
    if len(jobs) < 10:
        raise ValueError(f"need at least 10 GPU jobs that ran to fit arrivals, got {len(jobs)}")
    submit = pd.to_datetime(jobs["submit_ts"]).astype("datetime64[us]").to_numpy()
    local_s = (submit.astype("int64") / 1e6) + clock_offset_h * 3600.0
    milli = jobs["gpu_milli"].to_numpy(np.int64)
    runtime = jobs["runtime_s"].to_numpy(float)
    lo_s, hi_s = np.quantile(local_s, [0.01, 0.99])
    first_day, last_day = math.floor(lo_s / DAY_S), math.floor(hi_s / DAY_S)
    days = last_day - first_day + 1
    labels = resource_groups(milli, runtime)
    day_idx = np.floor(local_s / DAY_S).astype(np.int64) - first_day
    hour = np.floor((local_s % DAY_S) / 3600.0).astype(np.int64)
    inside = (day_idx >= 0) & (day_idx < days)
    groups = []
    for k in range(labels.max() + 1):
        sel = labels == k
        counts = np.zeros((days, 24), dtype=np.int64)
        np.add.at(counts, (day_idx[sel & inside], hour[sel & inside]), 1)
        name = GROUP_NAMES[k] if labels.max() == 2 else f"group{k}"
        groups.append(_fit_group(name, milli[sel], runtime[sel], counts, shrink, rng, reps))
    start = datetime(1970, 1, 1) + timedelta(days=first_day)
    return ArrivalModel(tuple(groups), days, int(len(jobs)), clock_offset_h,
                        (start.date().isoformat(), (start + timedelta(days=days - 1)).date()
                         .isoformat()))

