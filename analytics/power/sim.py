"""Hybrid batch + inference power profiles: a discrete-event co-simulation of one GPU pool.

Method source: Mural, Yu & Xie, "Workload composition smooths aggregate power demand while
sustaining short-horizon ramps in AI data centers" (the *hybrid power paper*; section numbers
below are its own). Batch jobs and LLM inference share a fixed pool of GPUs; inference has
priority access, batch jobs run on the residual capacity through a queue (FCFS with backfilling
behind a head-job reservation, or smallest-work-first), checkpointed into segments of length
``checkpoint_min``. Outcomes are the coefficient of variation of total power and the median
absolute change of mean-normalised total power over 1-, 5- and 15-minute horizons (Methods,
"Outcome metrics and normalization").

Pieces, in data-flow order:

* :func:`fit_arrival_model` - the paper's batch arrival generator (Methods, "Batch job arrivals"):
  Ward clustering of jobs on (log GPU count, log GPU-hours) into three resource groups; per group
  a negative-binomial daily count and a logistic-normal hourly profile (additive log-ratio,
  diagonal covariance) calibrated to the pooled hourly histogram and the spread of the daily
  centre of mass. :func:`generate_jobs` draws a scenario of any length from it.
* :func:`inference_load` - per-minute inference demand (a request trace's tokens per minute, or a
  labelled synthetic envelope) split equally over LLM templates whose GPUs per instance, output
  throughput and energy per token are ML.ENERGY measurements (:data:`TEMPLATES`), scaled to the
  scenario's inference share.
* :func:`simulate` - the heapq event loop: events ``(time_s, seq, kind, payload)`` with ``seq``
  from a per-run counter; kinds job arrival, segment end and capacity change (the inference
  allocation changes every minute). Flat records -> DataFrames.
* :func:`power_metrics`, :func:`run_scenario`, :func:`sweep` - the experiments (hold GPU count and
  target utilisation fixed, vary the inference share).

Units are in names: ``_s`` seconds, ``_min`` minutes, ``_w`` watts, ``_j`` joules, ``milli``
thousandths of a GPU (GPU-sharing pods of the Alibaba openb trace request fractions of one GPU;
the engine counts capacity in milli-GPUs so occupancy arithmetic is exact).
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from analytics.config import DEFAULT_T0, GPU_CATALOG

# ----------------------------------------------------------------------------------------------
# Measured inputs (baked so the app runs without the staged files; tests re-derive them)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMTemplate:
    """One representative LLM serving configuration (hybrid power paper, Methods, "Workload
    characteristics": GPUs per serving instance and an effective power per active request).

    Attributes
    ----------
    model : model id as in ML.ENERGY
    max_num_seqs : vLLM maximum batch size of the configuration (the speed setting)
    gpus : GPUs per serving instance
    throughput_tok_s : output tokens per second of one instance at that setting
    power_w : average power of one instance (all its GPUs) at that throughput, W
    energy_per_token_j : J per output token (= power_w / throughput_tok_s)
    median_itl_ms : median inter-token latency, ms (orders the speed settings)
    """

    model: str
    max_num_seqs: int
    gpus: int
    throughput_tok_s: float
    power_w: float
    energy_per_token_j: float
    median_itl_ms: float


#: ML.ENERGY Benchmark v3 (``ml-energy/leaderboard`` public data, ``all_task_configurations_flat
#: .csv``), task ``lm-arena-chat``, ``gpu_model`` H100, ``weight_precision`` bfloat16. For each of
#: seven models the row with the given ``max_num_seqs`` and the fewest GPUs is used (speed F = 32,
#: M = 64, S = 128 sequences; inter-token latency grows with the batch). Fields: num_gpus,
#: output_throughput_tokens_per_sec, avg_power_watts, energy_per_token_joules, median_itl_ms.
#: :func:`templates_from_mlenergy` re-derives this table from the file.
TEMPLATE_MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B", "Qwen/Qwen3-14B",
                   "google/gemma-3-12b-it", "Qwen/Qwen3-32B", "google/gemma-3-27b-it",
                   "meta-llama/Llama-3.1-70B-Instruct")
SPEEDS = {"F": 32, "M": 64, "S": 128}
_T = LLMTemplate
TEMPLATES: dict[str, tuple[LLMTemplate, ...]] = {
    "F": (_T(TEMPLATE_MODELS[0], 32, 1, 3391.07, 559.71, 0.16506, 8.907),
          _T(TEMPLATE_MODELS[1], 32, 1, 2927.93, 478.08, 0.16328, 10.569),
          _T(TEMPLATE_MODELS[2], 32, 1, 2023.23, 493.87, 0.24410, 15.014),
          _T(TEMPLATE_MODELS[3], 32, 1, 1786.62, 483.82, 0.27080, 17.485),
          _T(TEMPLATE_MODELS[4], 32, 1, 960.54, 599.37, 0.62399, 28.807),
          _T(TEMPLATE_MODELS[5], 32, 1, 1088.16, 571.45, 0.52515, 28.285),
          _T(TEMPLATE_MODELS[6], 32, 4, 1486.67, 1794.22, 1.20688, 20.047)),
    "M": (_T(TEMPLATE_MODELS[0], 64, 1, 5147.15, 610.35, 0.11858, 11.500),
          _T(TEMPLATE_MODELS[1], 64, 1, 4314.68, 514.39, 0.11922, 13.950),
          _T(TEMPLATE_MODELS[2], 64, 1, 3140.32, 524.98, 0.16717, 18.936),
          _T(TEMPLATE_MODELS[3], 64, 1, 2691.36, 540.52, 0.20084, 22.892),
          _T(TEMPLATE_MODELS[4], 64, 2, 2653.82, 974.14, 0.36707, 22.446),
          _T(TEMPLATE_MODELS[5], 64, 2, 2653.71, 1029.70, 0.38802, 22.763),
          _T(TEMPLATE_MODELS[6], 64, 4, 2510.51, 2001.50, 0.79725, 22.432)),
    "S": (_T(TEMPLATE_MODELS[0], 128, 1, 7036.53, 669.24, 0.09511, 16.482),
          _T(TEMPLATE_MODELS[1], 128, 1, 5930.30, 573.01, 0.09662, 20.701),
          _T(TEMPLATE_MODELS[2], 128, 1, 4474.35, 572.08, 0.12786, 26.164),
          _T(TEMPLATE_MODELS[3], 128, 1, 3545.60, 588.97, 0.16611, 34.727),
          _T(TEMPLATE_MODELS[4], 128, 2, 3905.31, 1073.71, 0.27493, 29.656),
          _T(TEMPLATE_MODELS[5], 128, 2, 3714.02, 1137.07, 0.30616, 31.996),
          _T(TEMPLATE_MODELS[6], 128, 4, 3876.27, 2183.76, 0.56337, 27.868)),
}
del _T

#: AcmeTrace (Hu et al., NSDI'24; ``InternLM/AcmeTrace`` ``data/utilization/util_pkl/
#: gpu_power_kalos.pkl``, staged as ``acmetrace/acme_power_util_cdf.csv``): per-GPU DCGM
#: ``POWER_USAGE`` of the Kalos cluster (A100-SXM4-80GB), W, at CDF percentiles 0, 5, ..., 100.
#: The distribution pools every sampled GPU (busy and idle phases of jobs, and idle GPUs), so it
#: has an idle mode near 60-100 W and a busy mode near 320-440 W.
ACME_PCT = tuple(float(p) for p in range(0, 101, 5))
ACME_KALOS_POWER_W = (55.7, 61.9, 63.0, 63.9, 65.0, 66.4, 72.9, 90.4, 94.0, 96.9, 101.4, 119.8,
                      148.7, 236.4, 325.3, 371.8, 388.7, 396.7, 403.6, 413.0, 599.7)


def _tdp(name: str) -> float:
    return next(k.tdp_w for k in GPU_CATALOG if k.name == name)


#: Hardware adjustment of batch power to the H100 baseline of the inference measurements (hybrid
#: power paper, Methods, "Batch-inference co-simulation": batch GPU power times a constant factor).
#: Here the ratio of board power limits, H100 SXM 700 W / A100 SXM4 400 W (datasheets, see
#: :data:`analytics.config.GPU_CATALOG`) = 1.75, because AcmeTrace's GPUs are A100s (the paper
#: scaled V100 traces the same way).
HW_FACTOR_A100_TO_H100 = _tdp("H100-80GB") / _tdp("A100-80GB")


def templates_from_mlenergy(path: str | Path, speed: str = "M",
                            models: tuple[str, ...] = TEMPLATE_MODELS) -> tuple[LLMTemplate, ...]:
    """Read the LLM templates from ML.ENERGY v3's flattened task-configuration CSV.

    Parameters
    ----------
    path : ``leaderboard_v3/all_task_configurations_flat.csv``
    speed : ``"F"``, ``"M"`` or ``"S"`` (``max_num_seqs`` 32, 64, 128)
    models : model ids, in the order wanted

    Returns
    -------
    tuple of LLMTemplate, one per model: the H100 / bfloat16 / ``lm-arena-chat`` row with that
    ``max_num_seqs`` and the fewest GPUs (ties: highest throughput).

    Raises
    ------
    KeyError
        Unknown speed, or a model without such a row.
    """
    import polars as pl

    seqs = SPEEDS[speed]
    frame = pl.read_csv(path, infer_schema_length=10_000).filter(
        (pl.col("task") == "lm-arena-chat") & (pl.col("gpu_model") == "H100")
        & (pl.col("weight_precision") == "bfloat16") & (pl.col("max_num_seqs") == seqs))
    out = []
    for model in models:
        rows = frame.filter(pl.col("model_id") == model).sort(
            ["num_gpus", "output_throughput_tokens_per_sec"], descending=[False, True])
        if rows.height == 0:
            raise KeyError(f"{model}: no H100 bfloat16 lm-arena-chat row with max_num_seqs {seqs}")
        r = rows.row(0, named=True)
        out.append(LLMTemplate(model, seqs, int(r["num_gpus"]),
                               float(r["output_throughput_tokens_per_sec"]),
                               float(r["avg_power_watts"]), float(r["energy_per_token_joules"]),
                               float(r["median_itl_ms"])))
    return tuple(out)


def acme_power_quantiles(cdf: pd.DataFrame, cluster: str = "Kalos",
                         pct: tuple[float, ...] = ACME_PCT) -> np.ndarray:
    """Per-GPU power (W) of an AcmeTrace cluster at the given CDF percentiles.

    Parameters
    ----------
    cdf : ``reference_cdf`` rows (``cluster``, ``metric``, ``cdf_percent``, ``value``), e.g.
        :func:`analytics.store.reference_cdfs` after ingesting ``acme_power_util_cdf.csv``
    cluster : ``"Kalos"`` or ``"Seren"``

    Returns
    -------
    ndarray of shape (len(pct),), W, linearly interpolated in the CDF.

    Raises
    ------
    KeyError
        The frame has no ``gpu_power_watts`` rows for that cluster.
    """
    rows = cdf[(cdf["cluster"] == cluster) & (cdf["metric"] == "gpu_power_watts")]
    if rows.empty:
        raise KeyError(f"no AcmeTrace gpu_power_watts CDF for cluster {cluster!r}")
    rows = rows.sort_values("cdf_percent")
    return np.interp(np.asarray(pct), rows["cdf_percent"].to_numpy(float),
                     rows["value"].to_numpy(float))


def sample_batch_power(rng: np.random.Generator, n: int,
                       pct: tuple[float, ...] | np.ndarray = ACME_PCT,
                       power_w: tuple[float, ...] | np.ndarray = ACME_KALOS_POWER_W,
                       hw_factor: float = HW_FACTOR_A100_TO_H100) -> np.ndarray:
    """Draw each batch job's power per active GPU: inverse-CDF sampling of the AcmeTrace
    distribution times the hardware factor.

    Returns
    -------
    ndarray of shape (n,), W per GPU on the H100 scale.

    >>> p = sample_batch_power(np.random.default_rng(0), 4)
    >>> bool(((p >= 55.7 * 1.75) & (p <= 599.7 * 1.75)).all())
    True
    """
    return np.interp(rng.random(n) * 100.0, np.asarray(pct, float),
                     np.asarray(power_w, float)) * hw_factor


# ----------------------------------------------------------------------------------------------
# Batch arrival generator (hybrid power paper, Methods, "Batch job arrivals")
# ----------------------------------------------------------------------------------------------

GROUP_NAMES = ("low", "medium", "high")
_DAY_S = 86_400.0


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
                   for g in self.groups if g.gpu_milli.size) / _DAY_S

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
    from scipy.cluster.hierarchy import fcluster, linkage

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


def _alr_inv(z: np.ndarray, ref: int) -> np.ndarray:
    """Inverse additive log-ratio: rows of shape (..., 23) -> compositions (..., 24)."""
    full = np.insert(z, ref, 0.0, axis=-1)
    full = full - full.max(axis=-1, keepdims=True)
    e = np.exp(full)
    return e / e.sum(axis=-1, keepdims=True)


def _simulate_days(alr_mean, alr_sd, ref, counts, normals, uniforms):
    """Hour of every simulated arrival for days with the given counts (common random numbers).

    normals : (n_days, 23) standard normals; uniforms : (sum(counts),) uniforms in [0, 1).
    Returns (hours, day_index) of the arrivals.
    """
    w = _alr_inv(alr_mean + normals * alr_sd, ref)
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
            sim = np.maximum(_alr_inv(m + normals_w * np.sqrt(kappa * var), ref)
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
    first_day, last_day = math.floor(lo_s / _DAY_S), math.floor(hi_s / _DAY_S)
    days = last_day - first_day + 1
    labels = resource_groups(milli, runtime)
    day_idx = np.floor(local_s / _DAY_S).astype(np.int64) - first_day
    hour = np.floor((local_s % _DAY_S) / 3600.0).astype(np.int64)
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


@dataclass(frozen=True)
class JobArrays:
    """Batch jobs of one scenario, in submit order.

    Attributes
    ----------
    submit_s : ndarray of shape (n,), seconds from the scenario start
    gpu_milli : ndarray of shape (n,), int, thousandths of a GPU
    runtime_s : ndarray of shape (n,), seconds (> 0)
    power_per_gpu_w : ndarray of shape (n,), W per GPU while running
    group : ndarray of shape (n,), int resource group (-1 when not from the generator)
    """

    submit_s: np.ndarray
    gpu_milli: np.ndarray
    runtime_s: np.ndarray
    power_per_gpu_w: np.ndarray
    group: np.ndarray

    def __len__(self) -> int:
        return int(self.submit_s.size)

    @classmethod
    def build(cls, submit_s, gpu_milli, runtime_s, power_per_gpu_w, group=None) -> JobArrays:
        """Arrays sorted by submit time (ties keep their order)."""
        submit_s = np.asarray(submit_s, float)
        order = np.argsort(submit_s, kind="stable")
        group = np.full(submit_s.size, -1) if group is None else np.asarray(group)
        return cls(submit_s[order], np.asarray(gpu_milli, np.int64)[order],
                   np.asarray(runtime_s, float)[order], np.asarray(power_per_gpu_w, float)[order],
                   group[order].astype(np.int64))


def generate_jobs(model: ArrivalModel, rng: np.random.Generator, days: int,
                  rate_scale: float = 1.0, max_runtime_s: float = math.inf,
                  max_gpu_milli: int | None = None, power_pct=ACME_PCT,
                  power_w=ACME_KALOS_POWER_W, hw_factor: float = HW_FACTOR_A100_TO_H100,
                  prefill: bool = False) -> JobArrays:
    """Draw ``days`` days of batch arrivals from a fitted model.

    For every day and group: the count is negative binomial with the fitted mean times
    ``rate_scale`` and the fitted shape (``r = mean^2 / (var - mean)``, unchanged by the scaling,
    which is exact for thinning), or Poisson when the trace is not overdispersed; the hourly
    composition is logistic-normal (ALR mean, diagonal variance); hourly counts are multinomial
    and times uniform within the hour (paper, Methods). Each job's (GPU request, runtime) pair is
    resampled from the group's observed jobs; runtimes are capped at ``max_runtime_s`` and GPU
    requests at ``max_gpu_milli`` (a job larger than the pool could never start). Each job's
    power per GPU is drawn by :func:`sample_batch_power`.

    ``prefill`` starts the system near steady state instead of empty (long jobs would otherwise
    need a warm-up as long as themselves): a Poisson number of jobs with mean
    ``daily rate x mean runtime``, drawn with probability proportional to runtime and given a
    uniform share of it as remaining runtime (the equilibrium of an M/G/inf system), are
    submitted at time 0.

    Returns
    -------
    JobArrays with times in seconds from the start of day 0 (scenario clock = the fitted trace's
    local clock).
    """
    sub, mil, run, grp = [], [], [], []
    for k, g in enumerate(model.groups):
        if g.gpu_milli.size == 0 or g.daily_mean <= 0 or rate_scale <= 0:
            continue
        mean = g.daily_mean * rate_scale
        if prefill:
            # equilibrium start (M/G/inf): Poisson many jobs already in service, picked with
            # probability proportional to runtime (length bias), each with a uniform fraction
            # of its runtime left; they are submitted at 0
            capped = np.minimum(g.runtime_s, max_runtime_s)
            n0 = rng.poisson(mean * capped.mean() / _DAY_S)
            if n0:
                pick = rng.choice(g.gpu_milli.size, n0, p=capped / capped.sum())
                sub.append(np.zeros(n0))
                mil.append(g.gpu_milli[pick])
                run.append(np.maximum(capped[pick] * rng.random(n0), 1.0))
                grp.append(np.full(n0, k))
        over = g.daily_var - g.daily_mean
        if over > 1e-9:
            r = g.daily_mean ** 2 / over
            n_day = rng.negative_binomial(r, r / (r + mean), size=days)
        else:
            n_day = rng.poisson(mean, size=days)
        z = g.alr_mean + rng.standard_normal((days, 23)) * np.sqrt(g.alr_var)
        w = _alr_inv(z, g.ref_hour)
        hourly = rng.multinomial(n_day, w)
        n = int(hourly.sum())
        if n == 0:
            continue
        day = np.repeat(np.repeat(np.arange(days), 24), hourly.ravel())
        hour = np.repeat(np.tile(np.arange(24), days), hourly.ravel())
        sub.append(day * _DAY_S + (hour + rng.random(n)) * 3600.0)
        pick = rng.integers(0, g.gpu_milli.size, n)
        mil.append(g.gpu_milli[pick])
        run.append(np.minimum(g.runtime_s[pick], max_runtime_s))
        grp.append(np.full(n, k))
    if not sub:
        return JobArrays.build([], [], [], [], [])
    milli = np.concatenate(mil)
    if max_gpu_milli is not None:
        milli = np.minimum(milli, max_gpu_milli)
    submit = np.concatenate(sub)
    power = sample_batch_power(rng, submit.size, power_pct, power_w, hw_factor)
    return JobArrays.build(submit, milli, np.concatenate(run), power, np.concatenate(grp))


# ----------------------------------------------------------------------------------------------
# Inference load (hybrid power paper, Methods, "Inference request arrivals", "Inference
# scheduling")
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InferenceLoad:
    """Per-minute inference demand on the pool.

    Attributes
    ----------
    demand_gpus : ndarray of shape (n_min,), int: GPUs the serving instances need each minute
    power_full_w : ndarray of shape (n_min,): inference power if that demand is fully served, W
    """

    demand_gpus: np.ndarray
    power_full_w: np.ndarray


def _instances(tok_s: np.ndarray, templates, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """GPUs and full-service power per minute for demand ``scale * tok_s`` split equally."""
    share = scale * tok_s / len(templates)
    gpus = np.zeros(tok_s.size, dtype=np.int64)
    power = np.zeros(tok_s.size)
    for t in templates:
        gpus += np.ceil(share / t.throughput_tok_s - 1e-9).astype(np.int64) * t.gpus
        power += share * t.energy_per_token_j
    return gpus, power


def inference_load(tokens_per_min: np.ndarray, mean_gpus: float,
                   templates: tuple[LLMTemplate, ...] = TEMPLATES["M"]) -> InferenceLoad:
    """Turn a per-minute demand shape into GPUs and power, scaled to a mean GPU allocation.

    The demand (tokens per minute; only its shape matters) is split equally over the templates
    (paper: "dividing total mean arrivals equally across templates"); each template serves its
    share with whole instances of ``gpus`` GPUs, ``ceil(demand / throughput_tok_s)`` of them,
    and draws ``demand x energy_per_token_j`` W (the effective power per active request of the
    paper, as tokens/s x J/token). One scale factor, found by bisection, makes the mean GPU
    allocation equal ``mean_gpus``, so a scenario's inference share fixes the demand level.

    Parameters
    ----------
    tokens_per_min : ndarray of shape (n_min,), >= 0
    mean_gpus : target mean of the allocated GPUs (0 -> no inference)

    Returns
    -------
    InferenceLoad

    Raises
    ------
    ValueError
        Negative demand, or a positive target with an all-zero demand series.

    >>> load = inference_load(np.array([1.0, 2.0, 3.0, 2.0]), 8.0, TEMPLATES["M"][:1])
    >>> load.demand_gpus.tolist(), round(float(load.demand_gpus.mean()), 1)
    ([4, 8, 12, 8], 8.0)
    """
    tok = np.asarray(tokens_per_min, float)
    if (tok < 0).any():
        raise ValueError("inference demand must be >= 0")
    if mean_gpus <= 0:
        return InferenceLoad(np.zeros(tok.size, np.int64), np.zeros(tok.size))
    if tok.sum() <= 0:
        raise ValueError("the inference demand series is all zeros")
    tok_s = tok / 60.0
    lo, hi = 0.0, 1.0
    while _instances(tok_s, templates, hi)[0].mean() < mean_gpus:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if _instances(tok_s, templates, mid)[0].mean() < mean_gpus:
            lo = mid
        else:
            hi = mid
    gpus, power = _instances(tok_s, templates, hi)
    return InferenceLoad(gpus, power)


def demand_shape(grid: pd.DataFrame) -> tuple[np.ndarray, pd.Timestamp, list[str]]:
    """The inference demand shape of a 1-minute demand grid, ready to be repeated.

    Parameters
    ----------
    grid : :func:`analytics.envelope.grid.demand_grid` at 1 minute (``ts``, ``target``)

    Returns
    -------
    (tokens_per_min, start, notes): a trace spanning a day or more is cut to its whole days from
    its first midnight, so repeating it keeps time of day (``start`` = that midnight); a shorter
    trace is returned as it is (``start`` = its first minute) and the notes say it has no daily
    pattern. Scenarios index it modulo its length.
    """
    ts = pd.to_datetime(grid["ts"])
    values = grid["target"].to_numpy(float)
    first_midnight = ts.iloc[0].ceil("D")
    skip = int((first_midnight - ts.iloc[0]).total_seconds() // 60)
    whole = (len(values) - skip) // 1440 * 1440
    if whole >= 1440:
        days = whole // 1440
        return values[skip:skip + whole], first_midnight, (
            [] if days >= 7 else [f"the inference trace has {days} whole day(s); scenarios "
                                  "repeat them"])
    return values, ts.iloc[0], [f"the inference trace covers {len(values)} minutes, less than "
                                "a whole day: scenarios repeat it end to end, so inference has "
                                "no daily pattern"]


def synthetic_demand(rng: np.random.Generator, n_min: int) -> np.ndarray:
    """A labelled SYNTHETIC inference envelope for stores without a request trace: a daily
    sine (trough 04:00, peak 16:00, +-50 %) times lognormal minute noise (sigma 0.3).
    Illustrative only, fitted to nothing.

    Returns
    -------
    ndarray of shape (n_min,), tokens per minute (arbitrary scale).
    """
    minute = np.arange(n_min)
    daily = 1.0 + 0.5 * np.sin(2 * np.pi * ((minute % 1440) / 1440 - 10 / 24))
    return daily * rng.lognormal(0.0, 0.3, n_min)


# ----------------------------------------------------------------------------------------------
# The discrete-event engine
# ----------------------------------------------------------------------------------------------

ARRIVAL, SEGMENT_END, CAPACITY = 0, 1, 2
SCHEDULERS = ("fcfs", "swf")


@dataclass(frozen=True)
class SimParams:
    """Engine settings.

    Attributes
    ----------
    capacity_gpus : GPUs in the pool
    scheduler : ``"fcfs"`` (first-come first-served by submit time) or ``"swf"`` (smallest work
        first: GPU request, then realised runtime; paper, Methods, "Batch scheduling")
    backfill : let later jobs start ahead of a blocked head job if they cannot delay its
        reservation (see :func:`simulate`)
    checkpoint_min : segment length l; ``None`` runs each job in one piece
    inference_cap_gpus : most GPUs inference may hold (``None``: the whole pool, uncapped)
    backfill_depth : queue entries behind the head examined per backfill pass
    """

    capacity_gpus: int = 256
    scheduler: str = "fcfs"
    backfill: bool = True
    checkpoint_min: float | None = 60.0
    inference_cap_gpus: int | None = None
    backfill_depth: int = 1000

    def __post_init__(self):
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler must be one of {SCHEDULERS}, got {self.scheduler!r}")
        if self.capacity_gpus <= 0:
            raise ValueError("capacity_gpus must be positive")
        if self.checkpoint_min is not None and self.checkpoint_min <= 0:
            raise ValueError("checkpoint_min must be positive (or None for no checkpointing)")


@dataclass(frozen=True)
class SimResult:
    """What one run produced (flat records as DataFrames).

    Attributes
    ----------
    minutes : per-minute time averages over [0, horizon): ``minute``, ``batch_gpus``,
        ``inference_gpus``, ``inference_demand_gpus``, ``batch_power_w``, ``inference_power_w``,
        ``total_power_w``, ``queued_jobs`` (at the minute's start)
    jobs : per job ``job``, ``submit_s``, ``first_start_s``, ``end_s`` (NaN if not reached),
        ``gpu_milli``, ``runtime_s``, ``group``
    segments : per started segment ``job``, ``segment``, ``start_s``, ``end_s``, ``gpu_milli``,
        ``power_w`` (only with ``record=True``)
    reservations : ``job``, ``time_s``, ``reservation_s`` each time a blocked head job got a
        reservation (only with ``record=True``)
    event_times_s : ndarray of the time of every processed event, in processing order (only with
        ``record=True``)
    n_events : events processed
    capacity_gpus : pool size
    """

    minutes: pd.DataFrame
    jobs: pd.DataFrame
    segments: pd.DataFrame
    reservations: pd.DataFrame
    event_times_s: np.ndarray
    n_events: int
    capacity_gpus: int


def simulate(jobs: JobArrays, params: SimParams, horizon_s: float,
             inference: InferenceLoad | None = None, record: bool = False) -> SimResult:
    """Run the batch queue beside the inference allocation on one GPU pool over ``[0, horizon_s)``.

    Events ``(time_s, seq, kind, payload)`` sit in a heap; ``seq`` comes from a counter local to
    this call, so ties resolve in insertion order and two runs on equal inputs are identical. All
    events at one instant are applied, then the scheduler runs once.

    * **Inference** (hybrid power paper, Methods, "Batch-inference co-simulation"): it has
      priority and its realised allocation is exogenous to the batch scheduler, which operates
      only on the remaining capacity. Minute ``m`` gives inference ``a(m) = min(demand, cap, C)``
      GPUs and leaves ``C - a(m)`` to batch; a **capacity change** event starts every minute.
    * **Arrival**: the job joins the queue.
    * **Segment end**: the segment's GPUs are released; a checkpointed job with work left
      rejoins the queue at once with its original priority (paper: segment k+1 becomes eligible
      immediately after segment k).
    * **Scheduling**: a started segment holds its GPUs for its whole length (paper: never
      preempted), so a segment may start only if it fits under the batch capacity left by
      inference in every minute it spans, beside the segments already running (the inference
      series is the exogenous plan the scheduler sees). Queue order is FCFS (submit time) or
      SWF (GPU request, then runtime). The head starts while it fits. A blocked head gets a
      reservation: the first minute from which its segment fits throughout, counting running
      segments (a running job ahead of the head in queue order is counted until its whole job
      ends, since its next segment requeues ahead of the head). A later job may backfill only if
      it fits now and its segment ends by the reservation, so it cannot delay the head (paper:
      "Later jobs may then start out of order only if they can complete before that reserved
      time"). Capacity is booked per whole minute, so a segment ending mid-minute frees that
      minute only when it ends (conservative by under a minute).

    Parameters
    ----------
    jobs : the batch jobs (submit times in seconds from 0)
    params : pool size, scheduler, checkpoint length, inference cap
    horizon_s : end of the run, s
    inference : per-minute demand (minute ``m`` covers ``[60 m, 60 m + 60)``); ``None`` = none
    record : keep segments, reservations and event times (tests; costs memory)

    Returns
    -------
    SimResult

    Raises
    ------
    RuntimeError
        If an event would move time backwards (an engine bug, never expected).
    """
    cap = params.capacity_gpus * 1000
    n = len(jobs)
    submit = jobs.submit_s
    milli = jobs.gpu_milli
    runtime = jobs.runtime_s
    pw = jobs.power_per_gpu_w
    seg_len = math.inf if params.checkpoint_min is None else params.checkpoint_min * 60.0
    swf = params.scheduler == "swf"
    inf_cap = cap if params.inference_cap_gpus is None else min(cap,
                                                              params.inference_cap_gpus * 1000)
    n_min = int(math.ceil(horizon_s / 60.0))
    longest_s = float(min(seg_len, runtime.max())) if n else 60.0
    look = int(math.ceil(longest_s / 60.0)) + 2  # minutes any one segment can span
    total_min = n_min + look + 1
    demand_m = np.zeros(total_min, np.int64)
    power_m = np.zeros(total_min)
    if inference is not None:
        k = min(n_min, inference.demand_gpus.size)
        demand_m[:k] = inference.demand_gpus[:k] * 1000
        power_m[:k] = inference.power_full_w[:k]
    alloc_m = np.minimum(demand_m, inf_cap)  # inference's priority allocation per minute
    resid = cap - alloc_m  # batch capacity per minute
    booked = np.zeros(total_min, np.int64)  # batch GPUs booked per minute by running segments
    constant = inference is None  # batch capacity never changes: the fast path
    milli_l, pw_l = milli.tolist(), pw.tolist()
    remaining = runtime.astype(float).copy()
    first_start = np.full(n, np.nan)
    end_at = np.full(n, np.nan)
    seg_count = np.zeros(n, np.int64)

    heap: list = []
    seq = 0
    for j in range(n):
        if submit[j] < horizon_s:
            heap.append((float(submit[j]), seq, ARRIVAL, j))
            seq += 1
    heapq.heapify(heap)
    if inference is not None:
        heapq.heappush(heap, (0.0, seq, CAPACITY, 0))
        seq += 1

    queue: list[tuple] = []  # sorted (key1, key2, job)
    version = [0]  # bumped whenever the queue changes
    cached: list = [-1, None, None, None, None]  # backfill arrays of the queue at a version
    running: dict[int, tuple[float, int, int]] = {}  # job -> (segment end, milli, last minute+1)
    used = 0
    batch_power = 0.0
    minute = 0
    state_t: list[float] = []
    state_v: list[tuple] = []
    segments: list[tuple] = []
    reservations: list[tuple] = []
    event_times: list[float] = []
    n_events = 0
    now = 0.0

    def key(j: int) -> tuple:
        return (float(milli[j]), float(runtime[j]), j) if swf else (float(submit[j]), j, j)

    def span(t: float, dur: float) -> tuple[int, int]:
        m0 = int(t // 60.0)
        return m0, max(m0 + 1, int(math.ceil((t + dur) / 60.0 - 1e-9)))

    def start(j: int, t: float) -> None:
        nonlocal used, batch_power, seq
        dur = min(remaining[j], seg_len)
        g = milli_l[j]
        m1 = 0
        if not constant:
            m0, m1 = span(t, dur)
            booked[m0:m1] += g
        remaining[j] -= dur
        if remaining[j] < 1e-9:
            remaining[j] = 0.0
        used += g
        batch_power += g / 1000.0 * pw_l[j]
        running[j] = (t + dur, g, m1)
        heapq.heappush(heap, (t + dur, seq, SEGMENT_END, j))
        seq += 1
        if first_start[j] != first_start[j]:  # NaN: the job's first segment
            first_start[j] = t
        if record:
            segments.append((j, int(seg_count[j]), t, t + dur, g, g / 1000.0 * pw_l[j]))
        seg_count[j] += 1

    def reservation_for(head: int, t: float, m0: int) -> float:
        """First minute boundary from which the head's next segment fits throughout."""
        need = int(milli[head])
        dur = min(remaining[head], seg_len)
        width = int(math.ceil(dur / 60.0 - 1e-9))
        avail = resid[m0:] - booked[m0:]
        hk = key(head)
        for j, (e, m, m1) in running.items():
            if remaining[j] > 0 and key(j) < hk:  # requeues ahead of the head: holds on
                a0, a1 = span(e, remaining[j])
                a0 = max(a0, m1)  # the minute its segment ends in is booked already
                avail[max(a0 - m0, 0):max(a1 - m0, 0)] -= m
        bad = np.concatenate([[0], np.cumsum(avail < need)])
        if len(bad) <= width + 1:
            return math.inf
        clear = np.flatnonzero(bad[1 + width:] - bad[1:-width] == 0)  # windows from m0 + 1 on
        return (m0 + 1 + int(clear[0])) * 60.0 if clear.size else math.inf

    def backfill_arrays() -> tuple:
        if cached[0] != version[0]:  # the queue changed since the last pass
            entries = queue[1:params.backfill_depth + 1]
            qj = np.fromiter((e[-1] for e in entries), np.int64, len(entries))
            cached[:] = [version[0], entries, qj, np.minimum(remaining[qj], seg_len), milli[qj]]
        return cached[1], cached[2], cached[3], cached[4]

    def schedule_constant(t: float) -> None:
        """Constant batch capacity (no inference): a segment fits iff it fits now, since the
        running ones only end; reservations are exact instants."""
        free = cap - used
        while queue and milli_l[queue[0][-1]] <= free:
            j = queue.pop(0)[-1]
            version[0] += 1
            start(j, t)
            free -= milli_l[j]
        if not queue or not params.backfill or free <= 0:
            return
        entries, qj, dur, need = backfill_arrays()
        ok = need <= free
        if not ok.any():
            return
        head = queue[0][-1]
        hk = key(head)
        res, avail = math.inf, free
        for e, m in sorted((e if remaining[j] == 0 or key(j) > hk else e + remaining[j], m)
                           for j, (e, m, _m1) in running.items()):
            avail += m
            if avail >= milli_l[head]:
                res = e
                break
        if record:
            reservations.append((head, t, res))
        ok &= t + dur <= res + 1e-9
        while ok.any():
            i = int(np.argmax(ok))
            j = int(qj[i])
            queue.remove(entries[i])
            version[0] += 1
            start(j, t)
            free -= milli_l[j]
            ok[i] = False
            ok &= need <= free

    def schedule(t: float) -> None:
        if not queue:
            return
        if constant:
            schedule_constant(t)
            return
        m0 = int(t // 60.0)
        avail = resid[m0:m0 + look] - booked[m0:m0 + look]
        # per-minute booking forgives float overruns of a minute boundary (span's tolerance), so
        # the running segments themselves bound what is free right now
        avail[0] = min(avail[0], resid[m0] - used)
        if avail[0] <= 0:
            return
        fit = np.minimum.accumulate(avail)  # fit[w - 1]: most GPUs free over the next w minutes

        def fits(j: int) -> int:
            w = span(t, min(remaining[j], seg_len))[1] - m0
            return w if milli[j] <= fit[w - 1] else 0

        while queue:
            j = queue[0][-1]
            w = fits(j)
            if not w:
                break
            queue.pop(0)
            version[0] += 1
            start(j, t)
            avail[:w] -= milli[j]
            fit = np.minimum.accumulate(avail)
        if not queue or not params.backfill or fit[0] <= 0:
            return
        # backfill: the queue behind the head, checked at once; the head's reservation is only
        # worked out when some job fits now
        entries, qj, dur, need = backfill_arrays()
        if qj.size == 0:
            return
        width = np.maximum(np.ceil((t + dur) / 60.0 - 1e-9).astype(np.int64) - m0, 1)
        ok = need <= fit[width - 1]
        if not ok.any():
            return
        head = queue[0][-1]
        res = reservation_for(head, t, m0)
        if record:
            reservations.append((head, t, res))
        ok &= t + dur <= res + 1e-9
        while ok.any():
            i = int(np.argmax(ok))
            j = int(qj[i])
            queue.remove(entries[i])
            version[0] += 1
            start(j, t)
            avail[:width[i]] -= milli[j]
            fit = np.minimum.accumulate(avail)
            ok[i] = False
            ok &= need <= fit[width - 1]


    def snapshot(t: float) -> None:
        target = int(alloc_m[minute])
        inf_real = max(0, min(target, cap - used))
        demand = int(demand_m[minute])
        inf_p = float(power_m[minute]) * inf_real / demand if demand > 0 else 0.0
        state_t.append(t)
        state_v.append((used, inf_real, batch_power, inf_p, len(queue), demand))

    snapshot(0.0)
    while heap and heap[0][0] < horizon_s:
        t = heap[0][0]
        if t < now:
            raise RuntimeError(f"time ran backwards: event at {t} s after {now} s")
        now = t
        while heap and heap[0][0] == t:
            _, _, kind, j = heapq.heappop(heap)
            n_events += 1
            if record:
                event_times.append(t)
            if kind == ARRIVAL:
                bisect.insort(queue, key(j))
                version[0] += 1
            elif kind == SEGMENT_END:
                _, m, m1 = running.pop(j)
                used -= m
                batch_power -= m / 1000.0 * pw_l[j]
                mt = int(t // 60.0)
                if mt < m1:
                    booked[mt:m1] -= m
                if remaining[j] > 0:
                    bisect.insort(queue, key(j))
                    version[0] += 1
                else:
                    end_at[j] = t
            else:  # CAPACITY: minute j starts
                minute = j
                if j + 1 < n_min:
                    heapq.heappush(heap, ((j + 1) * 60.0, seq, CAPACITY, j + 1))
                    seq += 1
        if not running:
            batch_power = 0.0  # drop float residue of the running sum
        minute = min(int(t // 60.0), n_min - 1)
        schedule(t)
        snapshot(t)

    minutes = _per_minute(np.asarray(state_t), np.asarray(state_v, float), n_min, horizon_s)
    job_frame = pd.DataFrame({"job": np.arange(n), "submit_s": submit, "first_start_s": first_start,
                              "end_s": end_at, "gpu_milli": milli, "runtime_s": runtime,
                              "group": jobs.group})
    seg_frame = pd.DataFrame(segments, columns=["job", "segment", "start_s", "end_s", "gpu_milli",
                                                "power_w"])
    res_frame = pd.DataFrame(reservations, columns=["job", "time_s", "reservation_s"])
    return SimResult(minutes, job_frame, seg_frame, res_frame, np.asarray(event_times), n_events,
                     params.capacity_gpus)


def _per_minute(t: np.ndarray, v: np.ndarray, n_min: int, horizon_s: float) -> pd.DataFrame:
    """Time averages of a piecewise-constant state over each minute (exact integrals)."""
    # keep the last state of each instant
    last = np.r_[t[1:] != t[:-1], True]
    t, v = t[last], v[last]
    bounds = np.minimum(np.arange(n_min + 1) * 60.0, horizon_s)
    widths = np.diff(t, append=horizon_s)
    cum = np.vstack([np.zeros(v.shape[1]), np.cumsum(v * widths[:, None], axis=0)])
    idx = np.searchsorted(t, bounds, side="right") - 1
    at = cum[idx] + v[idx] * (bounds - t[idx])[:, None]
    span = np.diff(bounds)
    avg = np.diff(at, axis=0) / np.where(span > 0, span, 1.0)[:, None]
    starts = v[np.searchsorted(t, bounds[:-1], side="right") - 1]
    return pd.DataFrame({
        "minute": np.arange(n_min),
        "batch_gpus": avg[:, 0] / 1000.0,
        "inference_gpus": avg[:, 1] / 1000.0,
        "inference_demand_gpus": avg[:, 5] / 1000.0,
        "batch_power_w": avg[:, 2],
        "inference_power_w": avg[:, 3],
        "total_power_w": avg[:, 2] + avg[:, 3],
        "queued_jobs": starts[:, 4].astype(np.int64),
    })


# ----------------------------------------------------------------------------------------------
# Metrics and experiments
# ----------------------------------------------------------------------------------------------

RAMP_HORIZONS_MIN = (1, 5, 15)


def power_metrics(total_power_w: np.ndarray, horizons_min: tuple[int, ...] = RAMP_HORIZONS_MIN
                  ) -> dict:
    """Coefficient of variation and median ramps of a 1-minute power series.

    Hybrid power paper, Methods, "Outcome metrics and normalization": CV = sd / mean of total
    power (population sd); the ramp over ``h`` minutes is the median of ``|p(t + h) - p(t)|``
    over every minute ``t``, where ``p`` is power divided by its mean (so it is a fraction of mean
    power per ``h`` minutes).

    Returns
    -------
    ``{"cv": float, "ramp_p50": {"1min": float, "5min": float, "15min": float}}``; NaN when the
    mean power is 0.

    >>> m = power_metrics(np.array([1.0, 3.0, 1.0, 3.0]), (1, 2))
    >>> m["cv"], m["ramp_p50"]
    (0.5, {'1min': 1.0, '2min': 0.0})
    """
    p = np.asarray(total_power_w, float)
    mean = p.mean() if p.size else 0.0
    if mean <= 0:
        return {"cv": math.nan, "ramp_p50": {f"{h}min": math.nan for h in horizons_min}}
    q = p / mean
    # rounded to 1e-10: per-minute averages of a constant power differ by float residue only
    return {"cv": round(float(p.std() / mean), 10),
            "ramp_p50": {f"{h}min": round(float(np.median(np.abs(q[h:] - q[:-h]))), 10)
                         if q.size > h else math.nan for h in horizons_min}}


@dataclass(frozen=True)
class PowerInputs:
    """Everything measured a scenario needs (fitted once, reused across a sweep).

    Attributes
    ----------
    arrivals : fitted batch arrival model
    demand_tokens_per_min : ndarray of shape (n,): the inference demand shape from its first
        whole day (see :func:`demand_shape`)
    demand_start : instant of the demand shape's first minute (the scenario's measured window
        starts there)
    demand_span_min : minutes of distinct inference trace in the shape
    jobs_label, inference_label : where the inputs came from (dataset names)
    synthetic : the inference demand is the synthetic envelope, not a trace
    power_pct, power_w : batch per-GPU power distribution (AcmeTrace CDF percentiles and W)
    power_source : which AcmeTrace table was used
    notes : caveats to show with the results
    """

    arrivals: ArrivalModel
    demand_tokens_per_min: np.ndarray
    demand_start: pd.Timestamp
    demand_span_min: int
    jobs_label: str
    inference_label: str
    synthetic: bool
    power_pct: tuple[float, ...] = ACME_PCT
    power_w: tuple[float, ...] = ACME_KALOS_POWER_W
    power_source: str = "AcmeTrace Kalos per-GPU power CDF (baked percentiles 0,5,..,100)"
    notes: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Scenario:
    """One experiment cell (hybrid power paper, Methods, "Batch-inference co-simulation").

    Attributes
    ----------
    inference_share : share of the total offered GPU-time that is inference, in [0, 1]
    utilization : target utilisation: offered (batch + inference) GPU-time / pool GPU-time
    gpus : GPUs in the pool
    days : measured window, days
    warmup_days : simulated before the window and discarded (queues fill; long jobs start)
    scheduler : ``"fcfs"`` (with backfilling) or ``"swf"``
    checkpoint_min : segment length l, minutes (``None``: no checkpointing)
    capped : inference may hold at most ``cap_factor`` x its mean allocation
    cap_factor : see ``capped``
    speed : serving speed setting of the LLM templates, ``"F"``, ``"M"``, ``"S"``
    """

    inference_share: float = 0.5
    utilization: float = 0.8
    gpus: int = 256
    days: float = 7.0
    warmup_days: float = 2.0
    scheduler: str = "fcfs"
    checkpoint_min: float | None = 60.0
    capped: bool = False
    cap_factor: float = 1.25
    speed: str = "M"

    def __post_init__(self):
        if not 0.0 <= self.inference_share <= 1.0:
            raise ValueError(f"inference share must be in [0, 1], got {self.inference_share}")
        if not 0.0 < self.utilization <= 1.0:
            raise ValueError(f"utilization must be in (0, 1], got {self.utilization}")
        if self.days <= 0 or self.warmup_days < 0:
            raise ValueError("days must be positive and warmup_days >= 0")
        if self.speed not in TEMPLATES:
            raise ValueError(f"speed must be one of {list(TEMPLATES)}, got {self.speed!r}")
        if self.cap_factor < 1.0:
            raise ValueError("cap_factor must be >= 1")
        SimParams(self.gpus, self.scheduler, True, self.checkpoint_min)  # validates the rest


@dataclass(frozen=True)
class ScenarioResult:
    """A scenario's measured window.

    Attributes
    ----------
    frame : per-minute ``ts`` plus the columns of :attr:`SimResult.minutes` for the window
    metrics : :func:`power_metrics` of total power plus ``realized_utilization``,
        ``inference_shortfall`` (share of inference GPU-minutes demanded but not served),
        ``batch_jobs`` (arrived in the window), ``mean_wait_h`` (submit to first start, jobs
        started in the window), ``mean_power_w``, ``events``, ``cv_batch``, ``cv_inference``
    scenario : the inputs
    """

    frame: pd.DataFrame
    metrics: dict
    scenario: Scenario


def run_scenario(inputs: PowerInputs, scenario: Scenario, rng: np.random.Generator
                 ) -> ScenarioResult:
    """Simulate one scenario and measure its window.

    Offered load is ``utilization x gpus`` GPUs on average: inference gets
    ``inference_share`` of it (:func:`inference_load`), batch the rest, by scaling the fitted
    arrival rate by ``(1 - share) x U x C / offered_gpus(trace)``. Runtimes are capped at the
    simulated length (a job longer than the run cannot contribute more), and the run starts
    from the equilibrium prefill of :func:`generate_jobs` followed by ``warmup_days``.

    Parameters
    ----------
    inputs : :class:`PowerInputs`
    scenario : :class:`Scenario`
    rng : generator for arrivals and per-job power draws

    Returns
    -------
    ScenarioResult
    """
    s = scenario
    warm_min = int(round(s.warmup_days * 1440))
    n_min = warm_min + int(round(s.days * 1440))
    horizon_s = n_min * 60.0
    offered = s.utilization * s.gpus
    idx = (np.arange(n_min) - warm_min) % inputs.demand_tokens_per_min.size
    templates = TEMPLATES[s.speed]
    load = inference_load(inputs.demand_tokens_per_min[idx], offered * s.inference_share,
                          templates)
    batch_gpus = offered * (1.0 - s.inference_share)
    natural = inputs.arrivals.offered_gpus(horizon_s)
    scale = batch_gpus / natural if natural > 0 else 0.0
    sim_days = int(math.ceil(n_min / 1440))
    jobs = generate_jobs(inputs.arrivals, rng, sim_days, scale, horizon_s, s.gpus * 1000,
                         inputs.power_pct, inputs.power_w, prefill=True)
    cap = None
    if s.capped and s.inference_share > 0:
        cap = int(math.ceil(s.cap_factor * float(load.demand_gpus.mean())))
    params = SimParams(s.gpus, s.scheduler, True, s.checkpoint_min, cap)
    res = simulate(jobs, params, horizon_s, load if s.inference_share > 0 else None)
    window = res.minutes.iloc[warm_min:].reset_index(drop=True)
    start = inputs.demand_start
    window.insert(0, "ts", start + pd.to_timedelta(window["minute"] - warm_min, unit="min"))
    metrics = power_metrics(window["total_power_w"].to_numpy())
    dem = window["inference_demand_gpus"].sum()
    jw = res.jobs
    in_win = (jw["submit_s"] >= warm_min * 60.0)
    started = jw["first_start_s"] >= warm_min * 60.0
    wait = (jw["first_start_s"] - jw["submit_s"])[started]
    metrics.update({
        "realized_utilization": float((window["batch_gpus"] + window["inference_gpus"]).mean()
                                      / s.gpus),
        "inference_shortfall": max(0.0, float(1 - window["inference_gpus"].sum() / dem))
        if dem > 0 else 0.0,
        "batch_jobs": int(in_win.sum()),
        "mean_wait_h": float(wait.mean() / 3600) if len(wait) else math.nan,
        "mean_power_w": float(window["total_power_w"].mean()),
        "cv_batch": power_metrics(window["batch_power_w"].to_numpy())["cv"],
        "cv_inference": power_metrics(window["inference_power_w"].to_numpy())["cv"],
        "events": int(res.n_events),
    })
    return ScenarioResult(window, metrics, scenario)


DEFAULT_SHARES = tuple(round(x / 10, 1) for x in range(11))
DEFAULT_UTILIZATIONS = (0.5, 0.8)


def sweep(inputs: PowerInputs, base: Scenario, rng: np.random.Generator,
          shares: tuple[float, ...] = DEFAULT_SHARES,
          utilizations: tuple[float, ...] = DEFAULT_UTILIZATIONS, replications: int = 3,
          progress=None) -> pd.DataFrame:
    """Hold GPU count and target utilisation fixed and vary the inference share.

    Each cell is run ``replications`` times and its metrics averaged. The replications' seeds
    are drawn once from ``rng`` and reused in every cell (common random numbers: the same
    uniforms drive arrivals and power draws at every share, so differences between cells come
    from the composition, not from a different random week).

    Parameters
    ----------
    inputs, base : fitted inputs and the scenario whose other settings are kept
    rng : generator the replication seeds are drawn from
    shares : inference shares, in [0, 1]
    utilizations : target utilisations
    replications : runs per cell
    progress : optional ``callable(done, total)``

    Returns
    -------
    DataFrame with one row per (utilization, inference_share): ``cv``, ``ramp_1min``,
    ``ramp_5min``, ``ramp_15min`` and the other :attr:`ScenarioResult.metrics` (means over the
    replications), plus ``replications``.
    """
    if replications < 1:
        raise ValueError("replications must be >= 1")
    seeds = [int(x) for x in rng.integers(2**62, size=replications)]
    rows = []
    total = len(shares) * len(utilizations) * replications
    done = 0
    for u in utilizations:
        for x in shares:
            for seed in seeds:
                if progress:
                    progress(done, total)
                res = run_scenario(inputs, replace(base, inference_share=float(x),
                                                   utilization=float(u)),
                                   np.random.default_rng(seed))
                m = dict(res.metrics)
                ramps = m.pop("ramp_p50")
                rows.append({"utilization": float(u), "inference_share": float(x),
                             **{f"ramp_{k}": v for k, v in ramps.items()}, **m})
                done += 1
    table = pd.DataFrame(rows).groupby(["utilization", "inference_share"], as_index=False,
                                       sort=False).mean()
    table["replications"] = replications
    return table


def shape_report(table: pd.DataFrame) -> dict:
    """Whether a sweep shows the paper's shapes, per utilisation.

    ``u_shape_cv``: some interior share has a CV below both ends (batch-only and
    inference-only). ``hump_15min``: some interior share has a 15-minute ramp above both ends.
    Also the share at the CV minimum and at the 15-minute ramp maximum.

    Returns
    -------
    dict keyed by utilisation (as a string) -> {"u_shape_cv", "cv_min_share", "hump_15min",
    "ramp15_max_share"}
    """
    out = {}
    for u, g in table.groupby("utilization"):
        g = g.sort_values("inference_share")
        cv = g["cv"].to_numpy()
        r15 = g["ramp_15min"].to_numpy()
        shares = g["inference_share"].to_numpy()
        inner = slice(1, len(g) - 1)
        out[f"{u:g}"] = {
            "u_shape_cv": bool(len(g) > 2 and np.nanmin(cv[inner]) < min(cv[0], cv[-1])),
            "cv_min_share": float(shares[int(np.nanargmin(cv))]),
            "hump_15min": bool(len(g) > 2 and np.nanmax(r15[inner]) > max(r15[0], r15[-1])),
            "ramp15_max_share": float(shares[int(np.nanargmax(r15))]),
        }
    return out


def daily_profile(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean power by hour of day, each component divided by its own mean (1 = the component's
    average), from a scenario frame.

    Returns
    -------
    DataFrame of shape (24, 4): ``hour``, ``total``, ``batch``, ``inference`` (NaN for a
    component that is always 0).
    """
    hours = pd.to_datetime(frame["ts"]).dt.hour
    out = {"hour": np.arange(24)}
    for col, name in (("total_power_w", "total"), ("batch_power_w", "batch"),
                      ("inference_power_w", "inference")):
        mean = frame[col].mean()
        by = frame[col].groupby(hours).mean().reindex(range(24))
        out[name] = (by / mean).to_numpy() if mean > 0 else np.full(24, np.nan)
    return pd.DataFrame(out)


def clock_offset_for(fmt: str | None) -> float:
    """Hours from UTC to the site clock of a job-trace format: MIT SuperCloud (Boston, EST in
    January-March 2021) -5; others 0 (Slurm sacct times are already local; openb times are
    relative)."""
    return -5.0 if fmt == "mit_supercloud_slurm" else 0.0


def prepare_inputs(jobs: pd.DataFrame, demand_grid: pd.DataFrame | None, rng: np.random.Generator,
                   jobs_label: str, inference_label: str | None = None, clock_offset_h: float = 0.0,
                   power_cdf: pd.DataFrame | None = None, min_days: int = 7) -> PowerInputs:
    """Fit the arrival model and lay out the inference demand for scenarios.

    Parameters
    ----------
    jobs : :func:`analytics.store.gpu_jobs` frame
    demand_grid : 1-minute :func:`analytics.envelope.grid.demand_grid` of an inference trace, or ``None``
        for the SYNTHETIC envelope (:func:`synthetic_demand`), flagged ``synthetic``
    rng : generator (arrival-model calibration, synthetic envelope)
    jobs_label, inference_label : dataset names for the output
    clock_offset_h : see :func:`fit_arrival_model`
    power_cdf : ``reference_cdf`` rows; when AcmeTrace's Kalos CDF is among them its full
        1,000-point CDF replaces the baked percentiles
    min_days : days of SYNTHETIC envelope to lay out

    Raises
    ------
    ValueError
        Too few GPU jobs, or an all-zero demand series.
    """
    notes = []
    model = fit_arrival_model(jobs, rng, clock_offset_h)
    if demand_grid is None:
        n = min_days * 1440
        shape = synthetic_demand(rng, n)
        start = pd.Timestamp(DEFAULT_T0).tz_localize(None)
        span = n
        inference_label = "SYNTHETIC envelope"
        notes.append("no inference trace in the store: the inference demand is a SYNTHETIC daily "
                     "envelope, not measured traffic")
    else:
        shape, start, more = demand_shape(demand_grid)
        span = int(shape.size)
        notes += more
        if shape.sum() <= 0:
            raise ValueError(f"{inference_label}: the inference demand is all zeros")
    pct, pw, src = ACME_PCT, ACME_KALOS_POWER_W, PowerInputs.power_source
    if power_cdf is not None and not power_cdf.empty:
        rows = power_cdf[(power_cdf["cluster"] == "Kalos")
                         & (power_cdf["metric"] == "gpu_power_watts")].sort_values("cdf_percent")
        if not rows.empty:
            pct = tuple(rows["cdf_percent"].astype(float))
            pw = tuple(rows["value"].astype(float))
            src = "AcmeTrace Kalos per-GPU power CDF from the store (reference_cdf)"
    if model.days < 3:
        notes.append(f"the job trace spans only {model.days} day(s): daily profiles are rough")
    return PowerInputs(model, np.asarray(shape, float), pd.Timestamp(start), int(span),
                       jobs_label, inference_label or "", demand_grid is None, pct, pw, src,
                       tuple(notes))


def describe_inputs(inputs: PowerInputs, scenario: Scenario) -> dict:
    """The provenance block of a result: datasets, groups, templates, power sources, notes."""
    return {
        "jobs": inputs.jobs_label,
        "inference": inputs.inference_label,
        "synthetic": inputs.synthetic,
        "groups": inputs.arrivals.summary(),
        "fit_window": list(inputs.arrivals.window),
        "clock_offset_h": inputs.arrivals.clock_offset_h,
        "templates": [{"model": t.model, "gpus": t.gpus, "max_num_seqs": t.max_num_seqs,
                       "throughput_tok_s": t.throughput_tok_s, "power_w": t.power_w,
                       "energy_per_token_j": t.energy_per_token_j}
                      for t in TEMPLATES[scenario.speed]],
        "templates_source": "ML.ENERGY v3 all_task_configurations_flat.csv: lm-arena-chat, H100, "
                            "bfloat16, fewest GPUs at max_num_seqs "
                            f"{SPEEDS[scenario.speed]}",
        "batch_power": inputs.power_source,
        "hw_factor": HW_FACTOR_A100_TO_H100,
        "hw_factor_source": "H100 SXM 700 W / A100 SXM4 400 W board power (GPU_CATALOG)",
        "notes": list(inputs.notes),
    }


NO_JOBS_HINT = ("no job trace in the store: add one on the Data page or with `headroom ingest "
                "FILE` - an MIT SuperCloud Slurm export (slurm-log-queueing-clean.csv), Slurm "
                "`sacct --parsable2` output, or an Alibaba openb pod list "
                "(openb_pod_list_default.csv)")


def candidate_datasets(ledger: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Possible inputs in a dataset ledger (:func:`analytics.store.list_datasets`): ``jobs``
    datasets by rows, most first, and demand datasets (requests or series) at 1-minute
    resolution or finer by time span, longest first."""
    jobs = ledger[ledger["kind"] == "jobs"].sort_values("rows", ascending=False)
    demand = ledger[ledger["kind"].isin(["requests", "demand_series"])
                    & (ledger["resolution_s"].fillna(0) <= 60)].copy()
    demand["span"] = demand["ts_max"] - demand["ts_min"]
    demand = demand.sort_values(["span", "dataset_id"], ascending=[False, True])
    return jobs["name"].tolist(), demand["name"].tolist()


def default_datasets(con) -> tuple[str | None, str | None]:
    """The store's default inputs: the first of each list of :func:`candidate_datasets`
    (``None`` where there is none)."""
    from analytics import store

    jobs, demand = candidate_datasets(store.list_datasets(con))
    return (jobs[0] if jobs else None, demand[0] if demand else None)


def load_inputs(con, jobs_name: str | None, inference_name: str | None,
                rng: np.random.Generator, clock_offset_h: float | None = None) -> PowerInputs:
    """Read a job trace and an inference trace from the store and fit :class:`PowerInputs`.

    Parameters
    ----------
    con : store connection
    jobs_name : a ``jobs`` dataset (``None``: :func:`default_datasets`)
    inference_name : a demand dataset at 1-minute resolution or finer, ``"synthetic"`` for the
        labelled synthetic envelope, or ``None`` for the default (synthetic when the store has
        none)
    rng : generator for the fit
    clock_offset_h : hours from UTC to the job trace's site clock (``None``:
        :func:`clock_offset_for` its format)

    Raises
    ------
    ValueError
        No job trace (the message says how to add one), a dataset of the wrong kind, or too few
        GPU jobs. ``analytics.store.UnknownDataset`` for an unknown name.
    """
    from analytics import store
    from analytics.envelope import grid

    default_jobs, default_inf = default_datasets(con)
    jobs_name = jobs_name or default_jobs
    if jobs_name is None:
        raise ValueError(NO_JOBS_HINT)
    info = store.dataset(con, jobs_name)
    if info["kind"] != "jobs":
        raise ValueError(f"{jobs_name} holds {info['kind']} rows, not jobs; {NO_JOBS_HINT}")
    jobs = store.gpu_jobs(con, jobs_name)
    if len(jobs) < 10:
        raise ValueError(f"{jobs_name}: only {len(jobs)} GPU jobs with start and end times; "
                         "the arrival model needs at least 10")
    if clock_offset_h is None:
        clock_offset_h = clock_offset_for(info["format"])
    if inference_name is None:
        inference_name = default_inf
    demand = None
    if inference_name not in (None, "synthetic"):
        from analytics.config import Weights

        inf = store.dataset(con, inference_name)
        target = "weighted_tokens"
        if inf["kind"] == "requests" and not store.request_fields(
                con, int(inf["dataset_id"]))["tokens"]:
            target = "gpu_seconds"  # traces without tokens (Alibaba GenAI LoRA)
        demand = grid.demand_grid(con, inference_name, 60, Weights(target=target))
    return prepare_inputs(jobs, demand, rng, jobs_name, inference_name, clock_offset_h,
                          store.reference_cdfs(con))
