"""Carbon-aware dispatch of the demand envelope across sites.

Method source: "Conformal GPU Demand Envelopes and Power-Aware Scheduling ..." (abstract):
SustainDC-aware dispatch cut emissions from 52.51 to 12.57 tCO2e; site and price are scenario
inputs.

Site model, per hour ``h`` and site ``s``:

* IT energy of serving ``x`` demand units: ``E_IT = x * e`` kWh, with ``e`` the energy per unit
  of the chosen GPU kind: ``(idle + (TDP - idle) * u) / throughput`` J per token (or
  ``power * 1 s`` per GPU-second) divided by 3.6e6.
* Facility energy ``E = E_IT * PUE_s(h)``, ``PUE = 1 + 1 / COP(T)`` with the chiller model
  ``COP(T) = max(1, COP_BASE - COP_K * (T - T_NOMINAL))`` on the outside dry-bulb temperature,
  parameters from SustainDC's ``dc_config.json`` ``hvac_configuration`` (CHILLER_COP_BASE 5.0,
  CHILLER_COP_K 0.1, CHILLER_COP_T_NOMINAL 25 degC; Naug et al., SustainDC, NeurIPS 2024 D&B).
  Pump and cooling-tower fan terms of SustainDC are not included: their per-unit flows cannot
  be scaled to a GPU site from the config alone. A site without weather uses ``T_NOMINAL``.
* Emissions ``tCO2e = E[kWh] * CI[gCO2/kWh] / 1e6``; cost ``= E[kWh] * price[USD/MWh] / 1000``.

Dispatch LP (``scipy.optimize.linprog``, HiGHS): minimise total tCO2e over all hours subject to
``sum_s x[s,h] = D[h]`` (every hour's demand served), ``x[s,h] <= capacity_s`` and
``x[s,h] <= max_share_s * D[h]``, over the allowed sites. Baselines: everything at the home site,
and a split proportional to site capacity.

Time alignment: carbon, weather and price years rarely match the trace's; an hour of the trace
takes the values of the same day-of-year and hour in the site-data year, plus an optional offset
in days.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import linprog

#: SustainDC dc_config.json, hvac_configuration (HewlettPackard/dc-rl).
COP_BASE, COP_K, COP_T_NOMINAL = 5.0, 0.1, 25.0

#: SustainDC carbon site (balancing authority) -> EnergyPlus weather file stem of a city in it,
#: following the location pairs SustainDC ships (CA-San Jose, TX-Dallas, NY, VA, WA, AZ, GA, IL).
WEATHER_FOR_SITE = {
    "CISO": "USA_CA_San.Jose-Mineta", "CA": "USA_CA_San.Jose-Mineta",
    "ERCO": "USA_TX_Dallas-Fort.Worth", "TX": "USA_TX_Dallas-Fort.Worth",
    "NYIS": "USA_NY_New.York-Kennedy", "NY": "USA_NY_New.York-Kennedy",
    "PJM": "USA_VA_Leesburg.Exec", "VA": "USA_VA_Leesburg.Exec",
    "BPAT": "USA_WA_Seattle-Tacoma", "WA": "USA_WA_Seattle-Tacoma",
    "WAAT": "USA_WA_Port.Angeles-Fairchild",
    "AZPS": "USA_AZ_Phoenix-Sky.Harbor", "AZ": "USA_AZ_Phoenix-Sky.Harbor",
    "SOCO": "USA_GA_Atlanta-Hartsfield-Jackson", "GA": "USA_GA_Atlanta-Hartsfield-Jackson",
    "MISO": "USA_IL_Chicago.OHare", "IL": "USA_IL_Chicago.OHare",
}


#: SustainDC balancing authority -> Green-DCC price zone covering it (prices are per zone).
PRICE_FOR_SITE = {"CISO": "US-CAL-CISO", "CA": "US-CAL-CISO", "ERCO": "US-TEX-ERCO",
                  "TX": "US-TEX-ERCO", "PJM": "US-MIDA-PJM", "VA": "US-MIDA-PJM",
                  "NYIS": "US-NY-NYIS", "NY": "US-NY-NYIS"}


def cop(temp_c: np.ndarray) -> np.ndarray:
    """Chiller coefficient of performance at outside temperature (SustainDC linear model).

    >>> cop(np.array([25.0, 35.0, 5.0])).tolist()
    [5.0, 4.0, 7.0]
    """
    return np.maximum(1.0, COP_BASE - COP_K * (np.asarray(temp_c, float) - COP_T_NOMINAL))


def pue(temp_c: np.ndarray) -> np.ndarray:
    """Power usage effectiveness ``1 + 1/COP(T)`` (chiller only, see module doc).

    >>> pue(np.array([25.0])).tolist()
    [1.2]
    """
    return 1.0 + 1.0 / cop(temp_c)


def tco2e(energy_kwh, gco2_per_kwh) -> float:
    """Tonnes CO2-equivalent: ``sum(kWh * gCO2/kWh) / 1e6``.

    >>> tco2e(np.array([1000.0, 2000.0]), np.array([400.0, 100.0]))
    0.6
    """
    return float(np.sum(np.asarray(energy_kwh, float) * np.asarray(gco2_per_kwh, float)) / 1e6)


def align_hours(hours: pd.DatetimeIndex, year: int, offset_days: int = 0) -> pd.DatetimeIndex:
    """Map trace hours onto ``year`` by day-of-year and hour (+ ``offset_days``).

    Day 366 of a leap year maps to day 365 of a common year.

    >>> align_hours(pd.DatetimeIndex(["2023-01-02 05:00"]), 2022, 1)[0]
    Timestamp('2022-01-03 05:00:00')
    """
    doy = hours.day_of_year.to_numpy() - 1 + offset_days
    days_in_year = 366 if pd.Timestamp(year=year, month=12, day=31).day_of_year == 366 else 365
    doy = np.mod(doy, days_in_year)
    base = pd.Timestamp(year=year, month=1, day=1)
    return pd.DatetimeIndex(base + pd.to_timedelta(doy, unit="D")
                            + pd.to_timedelta(hours.hour.to_numpy(), unit="h"))


@dataclass(frozen=True)
class Site:
    """A site: hourly carbon intensity, temperature and price on the dispatch hours.

    Attributes
    ----------
    name : site name (carbon dataset's ``site``)
    gco2_per_kwh : ndarray (H,), carbon intensity per dispatch hour
    temp_c : ndarray (H,) or None (then PUE at T_NOMINAL)
    usd_per_mwh : ndarray (H,) or None (no cost reported)
    capacity : most demand units per hour the site serves (inf = unlimited)
    max_share : most share of each hour's demand (1 = no limit)
    """

    name: str
    gco2_per_kwh: np.ndarray
    temp_c: np.ndarray | None = None
    usd_per_mwh: np.ndarray | None = None
    capacity: float = np.inf
    max_share: float = 1.0

    def pue(self) -> np.ndarray:
        t = self.temp_c if self.temp_c is not None else np.full(len(self.gco2_per_kwh),
                                                               COP_T_NOMINAL)
        return pue(np.where(np.isnan(t), COP_T_NOMINAL, t))


@dataclass
class Dispatch:
    """Result of :func:`dispatch`.

    Attributes
    ----------
    shares : DataFrame (hour, site, policy, units, it_kwh, facility_kwh, tco2e, usd)
    totals : DataFrame per policy: units, it_mwh, facility_mwh, tco2e, usd
    per_site : DataFrame per policy and site: units share, tco2e
    """

    shares: pd.DataFrame
    totals: pd.DataFrame
    per_site: pd.DataFrame
    notes: list[str] = field(default_factory=list)


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
    res = linprog(g_per_unit.ravel(), A_eq=a_eq, b_eq=demand,
                  bounds=list(zip(np.zeros(n_h * n_s), ub.ravel(), strict=True)), method="highs")
    if res.status != 0:
        raise ValueError(f"dispatch LP failed: {res.message}")
    aware = res.x.reshape(n_h, n_s)
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
    """The CLI document (DESIGN.md): baseline vs carbon-aware tCO2e, per-site figures."""
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
        "notes": d.notes,
    }


BASIS_PREFERENCE = ("avg", "LCA", "direct")


def _aligned(series: pd.DataFrame, hours: pd.DatetimeIndex, offset_days: int) -> np.ndarray:
    """Values of an hourly site series at the trace hours, aligned by day-of-year and hour."""
    if series.empty:
        return np.full(len(hours), np.nan)
    ts = pd.to_datetime(series["ts"])
    year = int(ts.dt.year.mode().iloc[0])
    idx = align_hours(hours, year, offset_days)
    return series.set_index(ts)["value"].reindex(idx).to_numpy(float)


def build_sites(con, names: list[str], hours: pd.DatetimeIndex, offset_days: int = 0,
                basis: str | None = None, capacity: dict[str, float] | None = None,
                max_share: dict[str, float] | None = None) -> tuple[list[Site], list[str]]:
    """Sites from the store's carbon / weather / price series, aligned to the trace hours.

    Weather: a weather series of the same site name (Green-DCC zones), else the SustainDC city
    of :data:`WEATHER_FOR_SITE`. Prices: the same site name, else the Green-DCC zone of
    :data:`PRICE_FOR_SITE`. Carbon basis: ``basis`` if given, else avg, LCA, direct in that
    order of preference.

    Returns the sites and notes on what each one uses. Raises KeyError for a site without
    carbon intensity.
    """
    from analytics import store

    cat = store.site_catalog(con)
    sites, notes = [], []
    for name in names:
        carbon = cat[(cat["tbl"] == "carbon_intensity") & (cat["site"] == name)]
        if carbon.empty:
            raise KeyError(f"no carbon intensity for site {name!r}; ingest its carbon file")
        bases = carbon["basis"].tolist()
        use = basis if basis in bases else next(b for b in BASIS_PREFERENCE + tuple(bases)
                                                if b in bases)
        ci = _aligned(store.site_hourly(con, "carbon_intensity", name, use), hours, offset_days)
        w_name = name if ((cat["tbl"] == "weather") & (cat["site"] == name)).any() \
            else WEATHER_FOR_SITE.get(name)
        temp = None
        if w_name is not None and ((cat["tbl"] == "weather") & (cat["site"] == w_name)).any():
            temp = _aligned(store.site_hourly(con, "weather", w_name), hours, offset_days)
            notes.append(f"{name}: carbon basis {use}, weather from {w_name}")
        else:
            notes.append(f"{name}: carbon basis {use}, no weather")
        price = None
        p_name = name if ((cat["tbl"] == "prices") & (cat["site"] == name)).any() \
            else PRICE_FOR_SITE.get(name)
        if p_name is not None and ((cat["tbl"] == "prices") & (cat["site"] == p_name)).any():
            price = _aligned(store.site_hourly(con, "prices", p_name), hours, offset_days)
            notes.append(f"{name}: prices from {p_name}")
        sites.append(Site(name, ci, temp, price, (capacity or {}).get(name, np.inf),
                          (max_share or {}).get(name, 1.0)))
    return sites, notes


def envelope_hourly_demand(result, method: str = "rolling", scale: float = 1.0
                           ) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """Hourly demand to dispatch: the test window's envelope upper bound summed per hour."""
    test = result.test
    hi = test[f"{method}_hi"].replace([np.inf, -np.inf], np.nan)
    hi = hi.fillna(test["y"])  # an infinite ACI bound carries the observed demand instead
    s = pd.Series(hi.to_numpy() * scale, index=pd.to_datetime(test["ts"])).resample("1h").sum()
    return s.index, s.to_numpy()


def kwh_per_unit(kind, unit: str, utilisation: float = 0.8) -> float:
    """IT energy (kWh) per demand unit for a GPU kind: per token (``weighted_tokens``) or per
    GPU-second (``gpu_seconds``). Power = idle + (TDP - idle) x utilisation (TDP when no
    measured idle). Raises ValueError when a token target meets a kind without throughput."""
    idle = kind.idle_w if kind.idle_w is not None else kind.tdp_w
    watts = idle + (kind.tdp_w - idle) * utilisation
    if unit == "gpu_seconds":
        return watts / 3.6e6
    if not kind.ref_tok_s:
        raise ValueError(f"{kind.name} has no reference throughput; pick another GPU kind")
    return watts / kind.ref_tok_s / 3.6e6


def plan_dispatch(con, result, site_names: list[str], kind, unit: str = "weighted_tokens",
                  scale: float = 1.0, utilisation: float = 0.8, method: str = "rolling",
                  offset_days: int = 0, basis: str | None = None, home: str | None = None,
                  capacity: dict[str, float] | None = None,
                  max_share: dict[str, float] | None = None) -> tuple[Dispatch, list[str]]:
    """Envelope -> hourly demand -> sites from the store -> carbon-aware dispatch.

    Returns the dispatch and the notes on what each site uses (basis, weather, prices).
    """
    hours, demand = envelope_hourly_demand(result, method, scale)
    sites, notes = build_sites(con, site_names, hours, offset_days, basis, capacity, max_share)
    d = dispatch(hours, demand, sites, kwh_per_unit(kind, unit, utilisation), home)
    return d, notes
