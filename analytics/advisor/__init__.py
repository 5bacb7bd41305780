"""Launch advisor (OmniPilot paper): which GPU kind x TP degree x precision to launch a model on.

Modules: :mod:`~analytics.advisor.model` (quantile cost model, held-out-cell CQR, support
envelope), :mod:`~analytics.advisor.decide` (feasibility, utility, ranking, baselines,
backtest), :mod:`~analytics.advisor.priors` (launch-success priors, queue waits from ``jobs``),
:mod:`~analytics.advisor.gate` (regression-gated promotion, ``model_versions``).

:func:`load` fits everything the advisor needs from the store in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

from analytics import store
from analytics.advisor import decide, model, priors


@dataclass
class Advisor:
    """Everything an advice needs: the cost model and the job-history context."""

    cost: model.CostModel
    ctx: decide.Context
    jobs_rows: int


def load(con, params: model.FitParams | None = None) -> Advisor:
    """Fit the cost model on every ``bench_runs`` row and build priors from every ``jobs`` row.

    Raises
    ------
    ValueError
        Too few benchmark rows (the message says what to ingest).
    """
    bench = store.bench_runs(con)
    cost = model.fit(bench, params)
    jobs = store.jobs(con)
    ctx = decide.Context(priors.launch_priors(jobs), priors.queue_wait_h(jobs))
    return Advisor(cost, ctx, int(len(jobs)))
