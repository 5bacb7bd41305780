"""Batch jobs of one scenario: the :class:`JobArrays` record the engine consumes and
:func:`generate_jobs`, which draws them from a fitted :class:`~analytics.power.arrivals.
ArrivalModel` (hybrid power paper, Methods, "Batch job arrivals") with per-job power from
:func:`~analytics.power.measured.sample_batch_power`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from analytics.power.arrivals import DAY_S, ArrivalModel, alr_inverse
from analytics.power.measured import (
    ACME_KALOS_POWER_W,
    ACME_PCT,
    HW_FACTOR_A100_TO_H100,
    sample_batch_power,
)


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
        """Arrays sorted by submit time (ties keep their order).

        Parameters are array-likes of shape (n,) in the units of the attributes; ``group``
        defaults to -1 (not from the generator).
        """
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
            n0 = rng.poisson(mean * capped.mean() / DAY_S)
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
        w = alr_inverse(z, g.ref_hour)
        hourly = rng.multinomial(n_day, w)
        n = int(hourly.sum())
        if n == 0:
            continue
        day = np.repeat(np.repeat(np.arange(days), 24), hourly.ravel())
        hour = np.repeat(np.tile(np.arange(24), days), hourly.ravel())
        sub.append(day * DAY_S + (hour + rng.random(n)) * 3600.0)
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


