"""Launch advisor (OmniPilot paper): which GPU kind x TP degree x precision to launch a model on.

Modules: :mod:`~analytics.advisor.model` (quantile cost model, held-out-cell CQR, support
envelope), :mod:`~analytics.advisor.decide` (feasibility, utility, ranking, baselines,
backtest), :mod:`~analytics.advisor.value` (launch decision, break-even value per token,
value-per-token sensitivity), :mod:`~analytics.advisor.priors` (launch-success priors, queue
waits from ``jobs``), :mod:`~analytics.advisor.gate` (regression-gated promotion, ``model_versions``),
:mod:`~analytics.advisor.voi` / :mod:`~analytics.advisor.voi_backtest` (value-of-information
benchmark gate and its sequential regret backtest).

:func:`build` fits everything the advisor needs from the ``bench_runs`` and ``jobs`` frames in
one call; reading them from the store is :func:`analytics.services.advisor.fit`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analytics.advisor import decide, model, priors


@dataclass
class Advisor:
    """Everything an advice needs: the cost model and the job-history context."""

    cost: model.CostModel
    ctx: decide.Context
    jobs_rows: int


def build(bench: pd.DataFrame, jobs: pd.DataFrame, params: model.FitParams | None = None,
          folds: model.FoldRunner | None = None) -> Advisor:
    """Fit the cost model on every benchmark row and the launch priors on every job row.

    Parameters
    ----------
    bench : ``bench_runs`` rows (:func:`analytics.store.bench_runs`), one per measured run
    jobs : ``jobs`` rows (:func:`analytics.store.jobs`): launch outcomes and queue waits
    params : cost-model settings (targets, folds, quantiles)
    folds : runs the cost model's out-of-fold fits (:func:`analytics.advisor.model.fit`;
        default in this process, or :func:`analytics.advisor.fold_points.runner`)

    Raises
    ------
    ValueError
        Too few benchmark rows (the message says what to ingest).
    """
    cost = model.fit(bench, params, folds)
    ctx = decide.Context(priors.launch_priors(jobs), priors.queue_wait_h(jobs))
    return Advisor(cost, ctx, int(len(jobs)))
