"""Carbon-aware dispatch of the demand envelope across sites.

Method source: "Conformal GPU Demand Envelopes and Power-Aware Scheduling ..." (abstract):
SustainDC-aware dispatch cut emissions from 52.51 to 12.57 tCO2e; site and price are scenario
inputs.

Site model, per hour ``h`` and site ``s``:

* IT energy of serving ``x`` demand units: ``E_IT = x * e`` kWh, with ``e`` the energy per unit
  of the chosen GPU kind: ``(idle + (TDP - idle) * u) / throughput`` J per token (or
  ``power * 1 s`` per GPU-second) divided by 3.6e6.
* Facility energy ``E = E_IT * PUE_s(h)``, ``PUE = 1 + 1 / COP(T)`` with SustainDC's chiller
  model (:mod:`analytics.decisions.sites`, which also builds the sites from the store).
* Emissions ``tCO2e = E[kWh] * CI[gCO2/kWh] / 1e6``; cost ``= E[kWh] * price[USD/MWh] / 1000``.

Dispatch LP (``scipy.optimize.linprog``, HiGHS): minimise total tCO2e over all hours subject to
``sum_s x[s,h] = D[h]`` (every hour's demand served), ``x[s,h] <= capacity_s`` and
``x[s,h] <= max_share_s * D[h]``, over the allowed sites. Baselines: everything at the home site,
and a split proportional to site capacity.

Every function here is pure; the service layer (:mod:`analytics.services.decisions`) reads the
site series from the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analytics.decisions.sites import COP_T_NOMINAL, Site
from analytics.envelope.grid import chronological_split
from analytics.hardware.power import gpu_power_w


def tco2e(energy_kwh, gco2_per_kwh) -> float:
    """Tonnes CO2-equivalent: ``sum(kWh * gCO2/kWh) / 1e6``.

    >>> tco2e(np.array([1000.0, 2000.0]), np.array([400.0, 100.0]))
    0.6
    """
    return float(np.sum(np.asarray(energy_kwh, float) * np.asarray(gco2_per_kwh, float)) / 1e6)


@dataclass
class Dispatch:
    """Result of :func:`dispatch`.

    Attributes
    ----------
    shares : DataFrame (hour, site, policy, units, it_kwh, facility_kwh, tco2e, usd)
    totals : DataFrame per policy: units, it_mwh, facility_mwh, tco2e, usd
    per_site : DataFrame per policy and site: units share, tco2e
    notes : list of str, what the sites use and what is not reported
    filled : list of dict, one per (site, series) whose missing trace hours were filled:
        :meth:`analytics.decisions.sites.SiteGap.as_dict` with the fill ``method``
    dispatched : what was dispatched (:func:`provisioned_hourly_demand` /
        :func:`envelope_hourly_demand`): ``what`` (``provisioned`` or ``upper``) and, for the
        provisioned capacity, the overbooking factor and its certificate
    """

    shares: pd.DataFrame
    totals: pd.DataFrame
    per_site: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    filled: list[dict] = field(default_factory=list)
    dispatched: dict = field(default_factory=dict)


def dispatch(hours: pd.DatetimeIndex, demand: np.ndarray, sites: list[Site],
             kwh_per_unit: float, home: str | None = None) -> Dispatch:
    """Carbon-aware split of hourly demand across sites vs the two baselines.

    Parameters
    ----------
    hours : DatetimeIndex (H,), trace hours
    demand : ndarray (H,), demand units per hour (e.g. weighted tokens from the envelope)
    sites : sites whose arrays are aligned to ``hours``
    kwh_per_unit : IT energy per demand unit (kWh)
    home : baseline site (default the first)

    Raises
    ------
    ValueError : no sites, or capacity / share limits that cannot serve some hour
    """
    if not sites:
        raise ValueError("choose at least one site")
    demand = np.asarray(demand, float)
    n_h, n_s = len(demand), len(sites)
    ci = np.column_stack([s.gco2_per_kwh for s in sites])  # (H, S)
    pues = np.column_stack([s.pue() for s in sites])
    if np.isnan(ci).any():  # hours the source left empty: refuse rather than guess
        bad = [s.name for s, col in zip(sites, ci.T, strict=True) if np.isnan(col).any()]
        raise ValueError(f"carbon intensity missing for some dispatch hours at {bad}; shift the "
                         "alignment offset or leave those sites out")
    g_per_unit = kwh_per_unit * pues * ci  # gCO2 per unit, (H, S)
    cap = np.array([s.capacity for s in sites], float)
    share = np.array([s.max_share for s in sites], float)
    ub = np.minimum(cap[None, :], share[None, :] * demand[:, None])  # (H, S)
    if (ub.sum(axis=1) < demand - 1e-9).any():
        h = int(np.argmax(ub.sum(axis=1) < demand - 1e-9))
        raise ValueError(f"hour {hours[h]}: site capacities and shares cannot serve "
                         f"{demand[h]:,.0f} units")
    # variables x[h, s] flattened row-major
    a_eq = np.zeros((n_h, n_h * n_s))
    for h in range(n_h):
        a_eq[h, h * n_s:(h + 1) * n_s] = 1.0
    from scipy.optimize import linprog  # on use: SciPy costs ~0.5 s to import

    res = linprog(g_per_unit.ravel(), A_eq=a_eq, b_eq=demand,
                  bounds=list(zip(np.zeros(n_h * n_s), ub.ravel(), strict=True)), method="highs")
    if res.status != 0:
        raise ValueError(f"dispatch LP failed: {res.message}")
    # HiGHS returns bound-level values within its tolerance (-1e-17, -0.0): clipped to the
    # bound, so no site shows a negative share
    aware = np.maximum(res.x.reshape(n_h, n_s), 0.0)
    home_i = [s.name for s in sites].index(home) if home else 0
    at_home = np.zeros((n_h, n_s))
    at_home[:, home_i] = demand
    finite_cap = np.where(np.isfinite(cap), cap, 1.0)
    prop = demand[:, None] * finite_cap[None, :] / finite_cap.sum()
    rows = []
    for policy, x in (("home", at_home), ("proportional", prop), ("carbon_aware", aware)):
        for j, s in enumerate(sites):
            it_kwh = x[:, j] * kwh_per_unit
            fac = it_kwh * pues[:, j]
            usd = fac * s.usd_per_mwh / 1000 if s.usd_per_mwh is not None else np.full(n_h, np.nan)
            rows.append(pd.DataFrame({
                "hour": hours, "site": s.name, "policy": policy, "units": x[:, j],
                "it_kwh": it_kwh, "facility_kwh": fac, "pue": pues[:, j],
                "gco2_per_kwh": ci[:, j], "tco2e": fac * ci[:, j] / 1e6, "usd": usd}))
    shares = pd.concat(rows, ignore_index=True)
    totals = shares.groupby("policy", sort=False).agg(
        units=("units", "sum"), it_mwh=("it_kwh", lambda v: v.sum() / 1000),
        facility_mwh=("facility_kwh", lambda v: v.sum() / 1000), tco2e=("tco2e", "sum"),
        usd=("usd", lambda v: v.sum(min_count=1))).reset_index()
    if any(s.usd_per_mwh is None for s in sites):
        totals["usd"] = np.nan  # a partial sum would compare policies unfairly
    per_site = shares.groupby(["policy", "site"], sort=False).agg(
        units=("units", "sum"), tco2e=("tco2e", "sum"),
        mean_pue=("pue", "mean"), mean_gco2_per_kwh=("gco2_per_kwh", "mean")).reset_index()
    per_site["share"] = per_site["units"] / demand.sum()
    notes = [f"{s.name}: no weather, PUE at {COP_T_NOMINAL:.0f} degC"
             for s in sites if s.temp_c is None]
    notes += [f"{s.name}: no price series, so no policy's total cost is reported" for s in sites
              if s.usd_per_mwh is None]
    return Dispatch(shares, totals, per_site, notes)


def to_json(d: Dispatch) -> dict:
    """The ``headroom dispatch`` document (``docs/cli.md``): baseline vs carbon-aware tCO2e,
    per-site figures."""
    t = d.totals.set_index("policy")
    sites = {}
    for r in d.per_site.itertuples():
        sites.setdefault(r.site, {"mean_gco2_per_kwh": r.mean_gco2_per_kwh,
                                  "mean_pue": r.mean_pue})[f"{r.policy}_share"] = r.share

    def num(v):
        return None if pd.isna(v) else float(v)

    return {
        "baseline_tco2e": num(t.loc["home", "tco2e"]),
        "proportional_tco2e": num(t.loc["proportional", "tco2e"]),
        "carbon_aware_tco2e": num(t.loc["carbon_aware", "tco2e"]),
        "it_mwh": num(t.loc["carbon_aware", "it_mwh"]),
        "facility_mwh": {p: num(t.loc[p, "facility_mwh"]) for p in t.index},
        "usd": {p: num(t.loc[p, "usd"]) for p in t.index},
        "sites": sites,
        "filled_hours": d.filled,
        "dispatched": d.dispatched,
        "notes": d.notes,
    }


def dispatch_hours(grid: pd.DataFrame, bin_s: int, params) -> pd.DatetimeIndex:
    """The trace hours a dispatch serves, from the demand grid alone (nothing is fitted).

    They are the hours of the envelope's test window (:func:`envelope_hourly_demand`), known
    from the chronological split before any model is fitted, so that missing site hours are
    found before the expensive fit.

    Parameters
    ----------
    grid : demand grid with ``ts`` (UTC bin starts), shape (n_bins, k)
    bin_s : bin width (s)
    params : :class:`analytics.envelope.pipeline.EnvelopeParams` (its split)

    Returns DatetimeIndex (H,) of hour starts. Raises ValueError (too few bins for a split).
    """
    split = chronological_split(len(grid), bin_s, params.split_days, params.split_frac)
    ts = pd.DatetimeIndex(pd.to_datetime(grid["ts"]).iloc[split.test])
    return pd.Series(1.0, index=ts).resample("1h").sum().index


def envelope_hourly_demand(result, method: str = "rolling", scale: float = 1.0
                           ) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """Hourly demand to dispatch: the test window's envelope upper bound summed per hour.

    Parameters
    ----------
    result : :class:`analytics.envelope.pipeline.EnvelopeResult`
    method : interval method whose ``<method>_hi`` column is used
    scale : traffic multiplier (scenario input)

    Returns
    -------
    hours : DatetimeIndex (H,)
    demand : ndarray (H,), demand units per hour (an infinite bound carries the observed demand)
    """
    test = result.test
    hi = test[f"{method}_hi"].replace([np.inf, -np.inf], np.nan)
    hi = hi.fillna(test["y"])  # an infinite ACI bound carries the observed demand instead
    s = pd.Series(hi.to_numpy() * scale, index=pd.to_datetime(test["ts"])).resample("1h").sum()
    return s.index, s.to_numpy()


#: What a dispatch can serve: the capacity Capacity provisions (f x the rolling band), or an
#: interval method's upper bound itself
DISPATCHED = ("provisioned", "upper")


def provisioned_hourly_demand(result, violation_target: float = 0.05, delta: float = 0.1,
                              scale: float = 1.0) -> tuple[pd.DatetimeIndex, np.ndarray, dict]:
    """Hourly demand to dispatch: the capacity the Capacity page provisions on the test window,
    the overbooking factor f (Learn-then-Test, :func:`analytics.decisions.capacity.overbook`)
    times the rolling band's upper bound, summed per hour. The conformal demand envelopes
    paper (abstract, Sec. 5-6) puts the calibrated factor and the dispatch in one policy: this
    dispatches what that policy provisions (issue 33, deviation 1).

    Returns
    -------
    hours : DatetimeIndex (H,); demand : ndarray (H,), demand units per hour;
    info : ``what`` = ``provisioned``, ``overbooking_factor`` (the chosen f; when none is
    certified, the largest factor tried, which is what Capacity provisions then),
    ``certified``, ``violation_target``, ``delta``
    """
    from analytics.decisions.capacity import overbook
    from analytics.envelope.pipeline import residual_stream

    stream = residual_stream(result.series, result.params.base_model)
    ob = overbook(stream, result.test["rolling_hi"].to_numpy(float), result.params.alpha,
                  violation_target, delta)
    test = ob.frame[ob.frame["part"] == "test"]
    s = pd.Series(test["capacity"].to_numpy(float) * scale,
                  index=pd.to_datetime(test["ts"])).resample("1h").sum()
    factor = ob.factor if ob.factor is not None else float(ob.curve["factor"].max())
    return s.index, s.to_numpy(), {"what": "provisioned", "overbooking_factor": factor,
                                   "certified": ob.factor is not None,
                                   "violation_target": violation_target, "delta": delta}


def kwh_per_unit(kind, demand_target: str, utilisation: float = 0.8) -> float:
    """IT energy (kWh) per demand unit for a GPU kind: per token (``weighted_tokens``) or per
    GPU-second (``gpu_seconds``). Power = :func:`analytics.hardware.power.gpu_power_w`
    (idle + (TDP - idle) x utilisation, TDP when no measured idle). Raises ValueError when a
    token target meets a kind without throughput."""
    watts = gpu_power_w(kind.idle_w, kind.tdp_w, utilisation)
    if demand_target == "gpu_seconds":
        return watts / 3.6e6
    if not kind.ref_tok_s:
        raise ValueError(f"{kind.name} has no reference throughput; pick another GPU kind")
    return watts / kind.ref_tok_s / 3.6e6


def plan_dispatch(result, sites: list[Site], kind, demand_target: str = "weighted_tokens",
                  scale: float = 1.0, utilisation: float = 0.8, method: str = "rolling",
                  home: str | None = None, dispatched: str = "provisioned",
                  violation_target: float = 0.05, delta: float = 0.1) -> Dispatch:
    """Envelope -> hourly demand -> carbon-aware dispatch over ``sites`` (pure).

    ``sites`` come from :func:`analytics.decisions.sites.build_sites` on the trace hours of
    :func:`envelope_hourly_demand` (the service layer reads their series from the store).
    ``demand_target`` is what the envelope counts (``weighted_tokens`` or ``gpu_seconds``),
    ``scale`` a traffic multiplier. ``dispatched``: ``provisioned`` (default) serves the
    capacity Capacity provisions at ``violation_target`` / ``delta``
    (:func:`provisioned_hourly_demand`, the rolling band's f x upper); ``upper`` serves the
    upper bound of interval method ``method`` itself (:func:`envelope_hourly_demand`).
    Raises ValueError (infeasible limits, missing throughput, an unknown ``dispatched``, a
    ``method`` other than rolling with ``provisioned``).
    """
    if dispatched not in DISPATCHED:
        raise ValueError(f"dispatched {dispatched!r}: choose one of {', '.join(DISPATCHED)}")
    if dispatched == "provisioned":
        if method != "rolling":
            raise ValueError(f"the provisioned capacity is the overbooking factor x the rolling "
                             f"band (Capacity's); method {method!r} is served with dispatched "
                             "'upper'")
        hours, demand, info = provisioned_hourly_demand(result, violation_target, delta, scale)
    else:
        hours, demand = envelope_hourly_demand(result, method, scale)
        info = {"what": "upper", "method": method}
    out = dispatch(hours, demand, sites, kwh_per_unit(kind, demand_target, utilisation), home)
    out.dispatched = info
    return out
