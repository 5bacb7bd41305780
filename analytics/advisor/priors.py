"""Launch-success priors and queue waits from job history (``jobs`` table).

OmniPilot paper, Sec. 3.3.2 / 5.2: a per-configuration launch-success prior from the
cluster-wide job harvest, shrunk toward the pooled rate by a beta-binomial estimator so sparsely
sampled configurations stay near the pool; used only in the utility's failure term.

Outcome coding of Slurm states (documented choice; the paper's harvest is not Slurm):

* success: ``COMPLETED`` (Slurm) or ``SUCCEEDED`` (Kubernetes pod phase, Alibaba openb);
* failure: ``FAILED``, ``NODE_FAIL``, ``BOOT_FAIL``, ``OUT_OF_MEMORY``;
* not a launch outcome (excluded): ``CANCELLED`` (a user decision), ``TIMEOUT`` (ran until its
  limit, so it launched), ``PENDING`` / ``RUNNING`` (censored), anything else.

Empirical Bayes: ``Beta(a, b)`` fitted by maximising the beta-binomial marginal likelihood
(``scipy.stats.betabinom``) over configurations; posterior mean ``(s + a) / (n + a + b)`` and an
equal-tailed interval from ``scipy.stats.beta``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, stats

SUCCESS = frozenset({"COMPLETED", "SUCCEEDED"})
FAILURE = frozenset({"FAILED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY"})


@dataclass(frozen=True)
class BetaPrior:
    """Fitted ``Beta(a, b)`` prior over per-configuration success rates."""

    a: float
    b: float

    @property
    def mean(self) -> float:
        return self.a / (self.a + self.b)


def outcomes(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu_kind, n_gpus): ``trials`` and ``successes`` of GPU jobs with a launch outcome.

    Parameters
    ----------
    jobs : rows of the ``jobs`` table (needs ``state``, ``n_gpus``, ``gpu_kind``).

    Returns
    -------
    DataFrame with columns gpu_kind, n_gpus, trials, successes (configurations with >= 1 trial).
    """
    j = jobs[(jobs["n_gpus"].fillna(0) > 0) & jobs["state"].isin(SUCCESS | FAILURE)].copy()
    j["gpu_kind"] = j["gpu_kind"].fillna("unknown")
    j["ok"] = j["state"].isin(SUCCESS).astype(int)
    out = (j.groupby(["gpu_kind", "n_gpus"], as_index=False)
           .agg(trials=("ok", "size"), successes=("ok", "sum")))
    return out.astype({"n_gpus": int, "trials": int, "successes": int})


def fit_prior(trials: np.ndarray, successes: np.ndarray) -> BetaPrior:
    """Empirical-Bayes ``Beta(a, b)`` by maximum marginal likelihood of the beta-binomial.

    With a single configuration the between-configuration spread is not identifiable; the prior
    is then centred on the pooled rate with strength 2 (``a + b = 2``).

    Raises
    ------
    ValueError
        No trials at all.
    """
    n = np.asarray(trials, dtype=float)
    s = np.asarray(successes, dtype=float)
    if n.sum() <= 0:
        raise ValueError("no launch outcomes (COMPLETED / FAILED ...) in the job history")
    pooled = float(np.clip(s.sum() / n.sum(), 1e-3, 1 - 1e-3))
    if len(n) < 2:
        return BetaPrior(2 * pooled, 2 * (1 - pooled))

    # parametrised by mean m (logit) and strength k = a + b (log): when the data show no spread
    # between configurations the MLE runs k to infinity, and capping k keeps the mean right
    def ab(theta):
        m = 1 / (1 + np.exp(-theta[0]))
        k = np.exp(np.clip(theta[1], -8, np.log(1e6)))
        return m * k, (1 - m) * k

    def nll(theta):
        a, b = ab(theta)
        return -float(stats.betabinom.logpmf(s, n, a, b).sum())

    start = np.array([np.log(pooled / (1 - pooled)), np.log(20.0)])
    res = optimize.minimize(nll, start, method="Nelder-Mead",
                            options={"xatol": 1e-6, "fatol": 1e-9, "maxiter": 4000})
    a, b = ab(res.x)
    return BetaPrior(float(a), float(b))


def shrink(successes: float, trials: float, prior: BetaPrior, level: float = 0.9):
    """Posterior mean and equal-tailed ``level`` interval of one configuration's success rate.

    >>> m, lo, hi = shrink(3, 4, BetaPrior(6.0, 4.0))
    >>> round(m, 4)   # (3 + 6) / (4 + 6 + 4)
    0.6429
    """
    a, b = prior.a + successes, prior.b + trials - successes
    lo, hi = stats.beta.ppf([(1 - level) / 2, (1 + level) / 2], a, b)
    return float(a / (a + b)), float(lo), float(hi)


def launch_priors(jobs: pd.DataFrame, level: float = 0.9) -> pd.DataFrame:
    """Shrunk launch-success rate per (gpu_kind, n_gpus), with the raw rate and interval.

    Returns
    -------
    DataFrame: gpu_kind, n_gpus, trials, successes, raw_rate, prior_mean, posterior_mean,
    lo, hi (``level`` interval), prior_a, prior_b. Empty when there are no GPU launch outcomes.
    """
    out = outcomes(jobs)
    if out.empty:
        return out
    prior = fit_prior(out["trials"].to_numpy(), out["successes"].to_numpy())
    rows = [shrink(s, n, prior, level) for s, n in zip(out["successes"], out["trials"],
                                                       strict=True)]
    out["raw_rate"] = out["successes"] / out["trials"]
    out["prior_mean"] = prior.mean
    out["posterior_mean"] = [r[0] for r in rows]
    out["lo"] = [r[1] for r in rows]
    out["hi"] = [r[2] for r in rows]
    out["prior_a"], out["prior_b"] = prior.a, prior.b
    return out.sort_values(["gpu_kind", "n_gpus"]).reset_index(drop=True)


def queue_wait_h(jobs: pd.DataFrame) -> pd.DataFrame:
    """Median and p90 queue wait (start - submit, hours) of started GPU jobs per GPU count."""
    j = jobs[(jobs["n_gpus"].fillna(0) > 0) & jobs["start_ts"].notna()
             & jobs["submit_ts"].notna()].copy()
    if j.empty:
        return pd.DataFrame(columns=["n_gpus", "jobs", "median_wait_h", "p90_wait_h"])
    j["wait_h"] = (j["start_ts"] - j["submit_ts"]).dt.total_seconds().clip(lower=0) / 3600
    return (j.groupby("n_gpus", as_index=False)
            .agg(jobs=("wait_h", "size"), median_wait_h=("wait_h", "median"),
                 p90_wait_h=("wait_h", lambda x: float(np.quantile(x, 0.9))))
            .astype({"n_gpus": int}))


def success_for(priors: pd.DataFrame, n_gpus: int, gpu_kind: str | None = None) -> float | None:
    """Posterior launch-success rate for an arm: the (kind, count) row if present, else the
    count pooled over kinds (trial-weighted posterior means), else the prior mean; ``None``
    without job history."""
    if priors is None or priors.empty:
        return None
    hit = priors[(priors["n_gpus"] == n_gpus)]
    if gpu_kind is not None and not hit[hit["gpu_kind"] == gpu_kind].empty:
        return float(hit[hit["gpu_kind"] == gpu_kind]["posterior_mean"].iloc[0])
    if not hit.empty:
        return float(np.average(hit["posterior_mean"], weights=hit["trials"]))
    return float(priors["prior_mean"].iloc[0])
