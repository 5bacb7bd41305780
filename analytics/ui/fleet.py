"""The Fleet plan page's reads (issue 30 item 5): the models an SLO can be judged on, the plan
and its exports, through :mod:`analytics.services.fleet`, cached on the data version."""

from __future__ import annotations

import os

from analytics.decisions.fleet import Slo
from analytics.live import PROMETHEUS_ENV
from analytics.services import fleet
from analytics.ui.cache import cached

slo_models = cached(fleet.slo_models)
#: every measured run with tokens/s per GPU, J/token, $ per 1M tokens and its Pareto fronts
leaderboard = cached(fleet.leaderboard)
_plan = cached(fleet.plan)


def request(model: str, slo: dict, **kwargs) -> fleet.PlanRequest:
    """A :class:`analytics.services.fleet.PlanRequest` from the page's inputs (``slo``:
    limit name -> value, :class:`analytics.decisions.fleet.Slo`'s fields)."""
    return fleet.PlanRequest(model=model, slo=Slo(**slo), **kwargs)


def plan(dataset: str, req: fleet.PlanRequest, bin_s: int) -> dict:
    """The fleet plan (:func:`analytics.services.fleet.plan`), cached. Raises ValueError."""
    return _plan(dataset, req, bin_s)


def export(out: dict, model: str, target: str, **options) -> str:
    """One export file of a plan (:func:`analytics.services.fleet.render`)."""
    return fleet.render(out, model, target, **options)


def arm_label(row) -> str:
    """An arm's label (:func:`analytics.services.fleet.arm_label`)."""
    return fleet.arm_label(row)


def document(out: dict, dataset: str, req: fleet.PlanRequest) -> dict:
    """The plan's summary document (:func:`analytics.services.fleet.document`): replicas per
    UTC hour, risk, backtest, economics, ranked arms, notes."""
    return fleet.document(out, dataset, req)


def predicted_arms(scored):
    """The advisor's feasible arms with $ per 1M tokens quantiles
    (:func:`analytics.services.fleet.predicted_arms`)."""
    return fleet.predicted_arms(scored)


def prometheus_url() -> str | None:
    """The operator's Prometheus address (``$HEADROOM_PROMETHEUS_URL``) that the KEDA trigger of
    the Kubernetes export carries; None when the operator set none. Operator configuration,
    never a page field (headroom itself does not connect to it here)."""
    return os.environ.get(PROMETHEUS_ENV) or None
