"""Decisions service: calibrated overbooking, GPU-hours and GPU mix; carbon-aware dispatch.

Both run on the envelope of :mod:`analytics.services.demand` with the same defaults as the
Demand page, so the CLI and the pages answer the same question with the same numbers
(conformal demand envelopes paper, Sec. 5 capacity and Sec. 6 dispatch).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analytics import store
from analytics.config import GPU_CATALOG
from analytics.decisions import capacity, dispatch, sites
from analytics.envelope import pipeline
from analytics.services import demand


@dataclass(frozen=True)
class CapacityRequest:
    """Capacity question on top of an envelope.

    Attributes
    ----------
    kinds : GPU kinds to consider: catalog names, or edited
        :class:`~analytics.config.GPUKind` records (the Capacity page's editable catalog);
        empty: the whole catalog
    violation_target : tolerated share of bins whose demand exceeds capacity, in (0, 1)
    delta : Learn-then-Test failure probability of the certificate, in (0, 1)
    objective : GPU-mix objective, ``cost``, ``power`` or ``carbon``
    available : ``((kind, count), ...)`` most GPUs per kind (empty: unlimited)
    utilization : GPU utilization for power, ``idle + (TDP - idle) * u``, in (0, 1]
    scale : traffic multiplier (a public trace is one tenant's sample), > 0
    gco2_per_kwh : carbon intensity for the carbon objective (None: not used)
    """

    kinds: tuple = ()
    violation_target: float = 0.05
    delta: float = 0.1
    objective: str = "cost"
    available: tuple[tuple[str, int], ...] = ()
    utilization: float = 0.8
    scale: float = 1.0
    gco2_per_kwh: float | None = None


def _kinds(kinds: tuple) -> list:
    """Catalog records of ``kinds`` (names are looked up, records pass through)."""
    known = {k.name: k for k in GPU_CATALOG}
    unknown = [k for k in kinds if isinstance(k, str) and k not in known]
    if unknown:
        raise ValueError(f"unknown GPU kind {unknown[0]!r}; known: {sorted(known)}")
    out = [known[k] if isinstance(k, str) else k for k in kinds]
    return out if kinds else list(GPU_CATALOG)


def capacity_plan(con, grid_req: demand.GridRequest, req: CapacityRequest,
                  params: pipeline.EnvelopeParams = demand.DEFAULT_ENVELOPE
                  ) -> capacity.CapacityPlan:
    """Overbooking factor, SLO violations, shortfall, GPU-hours and the hourly GPU mix.

    Raises ValueError (short series, uncoverable demand, unknown GPU kind), ``GridError``.
    """
    kinds = _kinds(req.kinds)
    for name, _ in req.available:
        _kinds((name,))
    target = demand.resolve_target(con, grid_req.dataset, grid_req.target)
    env = demand.envelope(con, grid_req, params)
    return capacity.plan(env, grid_req.bin_s, kinds, target, req.violation_target, req.delta,
                         req.objective, dict(req.available) or None, req.utilization,
                         req.gco2_per_kwh, req.scale)


def capacity_document(con, grid_req: demand.GridRequest, req: CapacityRequest,
                      params: pipeline.EnvelopeParams = demand.DEFAULT_ENVELOPE) -> dict:
    """The ``headroom capacity`` document."""
    return {"dataset": grid_req.dataset,
            **capacity.to_json(capacity_plan(con, grid_req, req, params))}


@dataclass(frozen=True)
class DispatchRequest:
    """Carbon-aware dispatch question on top of an envelope.

    Attributes
    ----------
    sites : carbon sites (balancing authorities / zones), e.g. ``("CISO", "ERCO")``
    gpu : GPU kind whose energy per unit of demand is used (catalog name or record)
    scale : traffic multiplier, > 0
    utilization : GPU utilization for power, in (0, 1]
    offset_days : shift when aligning site-data years to the trace by day-of-year
    basis : carbon basis (avg, LCA, direct; None: the best available)
    home : all-at-home baseline site (None: the first)
    max_share : most share of an hour per site, in (0, 1]
    method : interval method whose upper bound is served with ``dispatched`` = ``upper``
    dispatched : ``provisioned`` (default: the capacity Capacity provisions, the overbooking
        factor at ``violation_target`` / ``delta`` x the rolling band) or ``upper`` (the
        method's upper bound itself): :data:`analytics.decisions.dispatch.DISPATCHED`
    violation_target, delta : the provisioned capacity's Learn-then-Test certificate, as
        :class:`CapacityRequest` states them
    fill_missing : what to do with trace hours a site series has no value for
        (:data:`analytics.decisions.sites.FILL_METHODS`): ``none`` refuses, naming them,
        before anything is fitted; ``ffill`` / ``interpolate`` fill them and the document says
        how many at which site
    """

    sites: tuple[str, ...]
    gpu: object = "H100-80GB"
    scale: float = 1.0
    utilization: float = 0.8
    offset_days: int = 0
    basis: str | None = None
    home: str | None = None
    max_share: float = 1.0
    method: str = "rolling"
    fill_missing: str = "none"
    dispatched: str = "provisioned"
    violation_target: float = 0.05
    delta: float = 0.1


def dispatch_plan(con, grid_req: demand.GridRequest, req: DispatchRequest,
                  params: pipeline.EnvelopeParams = demand.DEFAULT_ENVELOPE):
    """Hourly dispatch of the envelope across sites minimising tCO2e, with the all-at-home and
    capacity-proportional baselines. Returns ``(Dispatch, notes)``.

    Missing site hours (trace hours whose carbon, weather or price hour is absent or blank)
    are found from the demand grid before the envelope is fitted: with ``fill_missing`` =
    ``none`` the plan is refused (:class:`analytics.decisions.sites.MissingHours`, naming them),
    else they are filled and listed in ``Dispatch.filled``.

    Raises ValueError (unknown GPU kind, short series, ``MissingHours``), KeyError (a site
    without carbon data).
    """
    kind = _kinds((req.gpu,))[0]
    if req.dispatched not in dispatch.DISPATCHED:
        raise ValueError(f"dispatched {req.dispatched!r}: choose one of "
                         f"{', '.join(dispatch.DISPATCHED)}")
    if req.dispatched == "provisioned" and req.method != "rolling":
        raise ValueError(f"the provisioned capacity is the overbooking factor x the rolling band "
                         f"(Capacity's); method {req.method!r} is dispatched as its upper bound "
                         "(--dispatched upper)")
    if req.fill_missing not in sites.FILL_METHODS:
        raise ValueError(f"fill method {req.fill_missing!r}: choose one of "
                         f"{', '.join(sites.FILL_METHODS)}")
    target = demand.resolve_target(con, grid_req.dataset, grid_req.target)
    grid = demand.grid(con, grid_req)
    sources = sites.site_sources(store.site_catalog(con), list(req.sites), req.basis)
    series = {key: store.site_hourly(con, *key) for src in sources for key in src.series_keys()}
    # the cheap check first: the trace hours are known from the split, before any fitting
    hours = dispatch.dispatch_hours(grid, grid_req.bin_s, params)
    gaps = sites.site_gaps(sources, series, hours, req.offset_days)
    if gaps and req.fill_missing == "none":
        raise sites.MissingHours(gaps)
    left = sites.site_gaps(sources, series, hours, req.offset_days, req.fill_missing)
    if left:
        raise sites.MissingHours(left, unfillable=True)
    env, _ = demand.envelope_of_grid(con, grid, grid_req.bin_s, params)
    hours, _ = dispatch.envelope_hourly_demand(env, req.method, req.scale)  # the same hours
    built = sites.build_sites(sources, series, hours, req.offset_days,
                              max_share={s: req.max_share for s in req.sites},
                              fill=req.fill_missing)
    notes = [line for src in sources for line in src.note()]
    notes += [f"filled by {req.fill_missing}: {g.describe()}" for g in gaps]
    plan = dispatch.plan_dispatch(env, built, kind, target, req.scale, req.utilization,
                                  req.method, req.home, req.dispatched, req.violation_target,
                                  req.delta)
    plan.filled = [g.as_dict(req.fill_missing) for g in gaps]
    return plan, notes


def dispatch_document(con, grid_req: demand.GridRequest, req: DispatchRequest,
                      params: pipeline.EnvelopeParams = demand.DEFAULT_ENVELOPE) -> dict:
    """The ``headroom dispatch`` document."""
    d, notes = dispatch_plan(con, grid_req, req, params)
    out = dispatch.to_json(d)
    out["notes"] = notes + out["notes"]
    gpu = req.gpu if isinstance(req.gpu, str) else req.gpu.name
    return {"dataset": grid_req.dataset, "gpu": gpu, "scale": req.scale,
            "fill_missing": req.fill_missing, **out}


def site_carbon_profile(con, site_names: tuple[str, ...], basis: str | None = None
                        ) -> pd.DataFrame:
    """Mean carbon intensity by hour of day (UTC) over each site's whole stored series: what
    carbon-aware dispatch plays with, read before any fit (the Dispatch page's first chart).

    Returns
    -------
    DataFrame ``site``, ``basis``, ``hour_utc`` (0-23), ``gco2_per_kwh`` (mean of the hourly
    means), ``days`` (days of series behind the hour); one row per site x hour.

    Raises KeyError (a site without carbon intensity), as :func:`dispatch_plan`.
    """
    out = []
    for src in sites.site_sources(store.site_catalog(con), list(site_names), basis):
        hourly = store.site_hourly(con, "carbon_intensity", src.name, src.basis).dropna()
        by_hour = (hourly.groupby(pd.to_datetime(hourly["ts"]).dt.hour)["value"]
                   .agg(["mean", "count"]))
        out.append(pd.DataFrame({"site": src.name, "basis": src.basis,
                                 "hour_utc": by_hour.index.astype(int),
                                 "gco2_per_kwh": by_hour["mean"].to_numpy(),
                                 "days": by_hour["count"].to_numpy()}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=["site", "basis", "hour_utc", "gco2_per_kwh", "days"])


def site_catalog(con) -> pd.DataFrame:
    """Sites with carbon / weather / price series in the store (one row per table x site)."""
    return store.site_catalog(con)


def pue_curve(t_min_c: float = -10.0, t_max_c: float = 45.0, n: int = 56
              ) -> tuple[np.ndarray, np.ndarray]:
    """Outdoor temperatures (degC, shape (n,)) and the PUE the dispatch model gives them
    (SustainDC chiller COP model, :func:`analytics.decisions.sites.pue`)."""
    t = np.linspace(t_min_c, t_max_c, n)
    return t, sites.pue(t)

