"""Launch-success priors and queue waits from job history (``jobs`` table).

OmniPilot paper, Sec. 3.3.2 / 5.2 (Appendix B: shrinkage sensitivity): a per-configuration
launch-success prior from the cluster-wide job harvest, shrunk toward the pooled rate by a
beta-binomial estimator so sparsely sampled configurations stay near the pool; used only in the
utility's failure term. A configuration is (GPU kind, GPU count), as the paper's H100x1 / H100x4
priors: the job's ``gpu_kind`` is mapped to the advisor's hardware key by
:func:`analytics.hardware.catalog.normalise` (``h100`` -> ``H100-80GB``; a bare ``a100`` is the
catalog's ``A100-40GB``; a MIG slice (``mig_slice``), a kind the catalog does not know, such
as MIT SuperCloud's ``volta``, and a mixed ``h100+a100`` job keep their label and so match no
arm).

Shrinkage of one configuration with ``s`` successes in ``n`` trials toward the prior mean
``m = a / (a + b)`` (the fitted pool)::

    posterior = (s + a) / (n + a + b) = raw + w * (m - raw),   w = (a + b) / (n + a + b)

so a kind with few jobs (small ``n``) is pulled most of the way to the pool.

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

from analytics.hardware import catalog as hardware

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
    DataFrame with columns gpu_kind (hardware key where the catalog knows the kind:
    :func:`gpu_kind_key`), n_gpus, trials, successes (configurations with >= 1 trial).
    """
    j = jobs[(jobs["n_gpus"].fillna(0) > 0) & jobs["state"].isin(SUCCESS | FAILURE)].copy()
    kind = j["gpu_kind"].fillna("unknown")
    mig = (j["mig_slice"].fillna(False).astype(bool) if "mig_slice" in j
           else pd.Series(False, index=j.index))
    j["gpu_kind"] = kind.where(mig, kind.map(gpu_kind_key))  # a MIG slice is no whole GPU
    j["ok"] = j["state"].isin(SUCCESS).astype(int)
    out = (j.groupby(["gpu_kind", "n_gpus"], as_index=False)
           .agg(trials=("ok", "size"), successes=("ok", "sum")))
    return out.astype({"n_gpus": int, "trials": int, "successes": int})


def gpu_kind_key(kind: str) -> str:
    """The advisor's hardware key for a job's GPU kind (:func:`analytics.hardware.catalog.normalise`);
    a mixed-kind job (``h100+a100``) keeps its label.

    >>> gpu_kind_key("h100"), gpu_kind_key("volta"), gpu_kind_key("h100+a100")
    ('H100-80GB', 'volta', 'h100+a100')
    """
    return kind if "+" in kind else hardware.normalise(kind)


def fit_prior(trials: np.ndarray, successes: np.ndarray) -> BetaPrior:
    """Empirical-Bayes ``Beta(a, b)`` by maximum marginal likelihood of the beta-binomial.

    With a single configuration the between-configuration spread is not identifiable; the prior
    is then centred on the pooled rate with strength 2 (``a + b = 2``).

    Raises
    ------
    ValueError
        No trials at all.
    """
    from scipy import optimize, stats  # here, not at import: advising needs neither

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
    from scipy import stats

    a, b = prior.a + successes, prior.b + trials - successes
    lo, hi = stats.beta.ppf([(1 - level) / 2, (1 + level) / 2], a, b)
    return float(a / (a + b)), float(lo), float(hi)


def launch_priors(jobs: pd.DataFrame, level: float = 0.9) -> pd.DataFrame:
    """Shrunk launch-success rate per (gpu_kind, n_gpus), with the raw rate and interval.

    Returns
    -------
    DataFrame: gpu_kind, n_gpus, trials, successes, raw_rate, prior_mean, posterior_mean,
    lo, hi (``level`` interval), prior_a, prior_b, shrinkage (``w = (a + b) / (n + a + b)``: the
    share of the way from the raw rate to the prior mean). Empty when there are no GPU launch
    outcomes.
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
    out["shrinkage"] = (prior.a + prior.b) / (out["trials"] + prior.a + prior.b)
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


@dataclass(frozen=True)
class LaunchTable:
    """Launch-success lookups built once from a :func:`launch_priors` frame (dict lookups instead
    of a pandas filter per arm).

    Attributes
    ----------
    by_kind : (gpu_kind, n_gpus) -> posterior mean of that configuration (``gpu_kind`` is the
        hardware key where the catalog knows it: :func:`gpu_kind_key`)
    pooled : n_gpus -> trial-weighted mean of the posterior means over GPU kinds
        (``np.average(posterior_mean, weights=trials)`` over that count's rows, in frame order)
    prior_mean : the fitted prior's mean (a count without job history); ``None`` without history
    """

    by_kind: dict
    pooled: dict
    prior_mean: float | None

    @classmethod
    def from_priors(cls, priors: pd.DataFrame | None) -> LaunchTable:
        if priors is None or priors.empty:
            return cls({}, {}, None)
        kinds = priors["gpu_kind"].tolist()
        counts = priors["n_gpus"].tolist()
        post = priors["posterior_mean"].to_numpy(float)
        by_kind = {}
        for kind, n, m in zip(kinds, counts, post, strict=True):
            by_kind.setdefault((kind, n), float(m))
        pooled = {}
        for n in dict.fromkeys(counts):
            rows = priors[priors["n_gpus"] == n]
            pooled[n] = float(np.average(rows["posterior_mean"], weights=rows["trials"]))
        return cls(by_kind, pooled, float(priors["prior_mean"].iloc[0]))

    def get(self, n_gpus, gpu_kind: str | None = None) -> float | None:
        """As :func:`success_for`: the (kind, count) rate if present, else the count pooled over
        kinds, else the prior mean; ``None`` without job history.

        >>> t = LaunchTable({("H100-80GB", 4): 0.4, ("A100-40GB", 4): 0.7}, {4: 0.55}, 0.8)
        >>> t.get(4, "H100-80GB"), t.get(4, "A100-40GB"), t.get(4, "B200"), t.get(2, "B200")
        (0.4, 0.7, 0.55, 0.8)
        """
        if self.prior_mean is None:
            return None
        if gpu_kind is not None and (gpu_kind, n_gpus) in self.by_kind:
            return self.by_kind[(gpu_kind, n_gpus)]
        return self.pooled.get(n_gpus, self.prior_mean)


@dataclass(frozen=True)
class WaitTable:
    """Median queue wait (hours) per GPU count, built once from a :func:`queue_wait_h` frame: the
    count's own median, else the median of the nearest count with data (first on ties), else 0."""

    n_gpus: np.ndarray
    median_wait_h: np.ndarray

    @classmethod
    def from_waits(cls, waits: pd.DataFrame | None) -> WaitTable:
        if waits is None or waits.empty:
            return cls(np.zeros(0), np.zeros(0))
        return cls(waits["n_gpus"].to_numpy(), waits["median_wait_h"].to_numpy(float))

    def get(self, n_gpus) -> float:
        if len(self.n_gpus) == 0:
            return 0.0
        hit = np.flatnonzero(self.n_gpus == n_gpus)
        k = hit[0] if len(hit) else int(np.argmin(np.abs(self.n_gpus - n_gpus)))
        return float(self.median_wait_h[k])


def success_for(priors: pd.DataFrame, n_gpus: int, gpu_kind: str | None = None) -> float | None:
    """Posterior launch-success rate for an arm (``gpu_kind``: a hardware key such as
    ``H100-80GB``): the (kind, count) row if present, else the
    count pooled over kinds (trial-weighted posterior means), else the prior mean; ``None``
    without job history. Many lookups: build a :class:`LaunchTable` once."""
    return LaunchTable.from_priors(priors).get(n_gpus, gpu_kind)
