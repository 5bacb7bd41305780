"""Dispatch sites: hourly carbon intensity, outside temperature (-> PUE) and price per site,
aligned to the trace's hours.

Owns the :class:`Site` record, the chiller PUE model and :func:`build_sites`, which reads the
store's carbon / weather / price series (the one store reader of the decisions package).

Cooling model: facility energy ``E = E_IT * PUE_s(h)``, ``PUE = 1 + 1 / COP(T)`` with the
chiller model ``COP(T) = max(1, COP_BASE - COP_K * (T - T_NOMINAL))`` on the outside dry-bulb
temperature, parameters from SustainDC's ``dc_config.json`` ``hvac_configuration``
(CHILLER_COP_BASE 5.0, CHILLER_COP_K 0.1, CHILLER_COP_T_NOMINAL 25 degC; Naug et al., SustainDC,
NeurIPS 2024 D&B). Pump and cooling-tower fan terms of SustainDC are not included: their
per-unit flows cannot be scaled to a GPU site from the config alone. A site without weather uses
``T_NOMINAL``.

Time alignment: carbon, weather and price years rarely match the trace's; an hour of the trace
takes the values of the same day-of-year and hour in the site-data year, plus an optional offset
in days. A trace hour whose site-data hour is absent from a series or blank is *missing*:
:func:`site_gaps` names them (in trace time and site-data time) before anything is fitted, and
dispatch refuses (:class:`MissingHours`) unless a fill method of :data:`FILL_METHODS` is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

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
        """PUE per dispatch hour, ndarray (H,); hours without a temperature use T_NOMINAL."""
        t = self.temp_c if self.temp_c is not None else np.full(len(self.gco2_per_kwh),
                                                               COP_T_NOMINAL)
        return pue(np.where(np.isnan(t), COP_T_NOMINAL, t))


BASIS_PREFERENCE = ("avg", "LCA", "direct")


#: What dispatch does with trace hours that have no site value (an absent hour or a blank value
#: in the site series): refuse and name them (``none``), carry the last earlier site hour's value
#: forward (``ffill``; hours before the first value take the first value), or interpolate
#: linearly between the site hours on either side (``interpolate``; held flat past the ends).
#: Both fills work in site-data time, on the series' own hourly axis, before the alignment.
FILL_METHODS = ("none", "ffill", "interpolate")


def _aligned(series: pd.DataFrame, hours: pd.DatetimeIndex, offset_days: int,
             fill: str = "none") -> tuple[np.ndarray, pd.DatetimeIndex]:
    """Values of an hourly site series at the trace hours, aligned by day-of-year and hour.

    Returns ``(values (H,), site-data hours (H,))``; NaN where the series has no value for the
    hour (absent or blank) and ``fill`` is ``none`` or has nothing to fill from.
    """
    if fill not in FILL_METHODS:
        raise ValueError(f"fill method {fill!r}: choose one of {', '.join(FILL_METHODS)}")
    if series.empty:
        return np.full(len(hours), np.nan), align_hours(hours, 2022, offset_days)
    ts = pd.to_datetime(series["ts"])
    year = int(ts.dt.year.mode().iloc[0])
    idx = align_hours(hours, year, offset_days)
    values = pd.Series(series["value"].to_numpy(float), index=pd.DatetimeIndex(ts))
    if fill != "none" and len(idx):
        axis = pd.date_range(min(values.index.min(), idx.min()),
                             max(values.index.max(), idx.max()), freq="h")
        values = values.reindex(axis)
        values = values.ffill().bfill() if fill == "ffill" else values.interpolate(
            method="linear", limit_direction="both")
    return values.reindex(idx).to_numpy(float), idx


_WHAT = {"carbon_intensity": "carbon intensity", "weather": "temperature", "prices": "price"}


@dataclass(frozen=True)
class SiteGap:
    """Trace hours for which one site series has no value (the hour is absent from the series
    or its value is blank).

    Attributes
    ----------
    site : dispatch site
    table : ``carbon_intensity``, ``weather`` or ``prices``
    series_site : site of the series (the carbon site, its weather city or its price zone)
    trace_hours : hours of the demand trace (UTC) without a value, in order
    site_hours : the site-data hours they map to (day-of-year alignment), same order
    """

    site: str
    table: str
    series_site: str
    trace_hours: tuple[pd.Timestamp, ...]
    site_hours: tuple[pd.Timestamp, ...]

    def describe(self, shown: int = 5) -> str:
        """One sentence naming the site, the series and the first ``shown`` trace hours."""
        def fmt(hours):
            return ", ".join(h.strftime("%Y-%m-%d %H:%M") for h in hours[:shown]) + (
                ", ..." if len(hours) > shown else "")
        n = len(self.trace_hours)
        src = "" if self.series_site == self.site else f" (from {self.series_site})"
        return (f"{self.site}: {n} trace hour{'s' if n != 1 else ''} without "
                f"{_WHAT[self.table]}{src}: {fmt(self.trace_hours)} (site-data hours "
                f"{fmt(self.site_hours)})")

    def as_dict(self, method: str | None = None) -> dict:
        """JSON object: site, series, hours (count), method, first trace / site-data hours."""
        out = {"site": self.site, "series": self.table, "series_site": self.series_site,
               "hours": len(self.trace_hours),
               "trace_hours": [h.isoformat() for h in self.trace_hours[:20]],
               "site_data_hours": [h.isoformat() for h in self.site_hours[:20]]}
        return {**out, "method": method} if method else out


class MissingHours(ValueError):
    """Dispatch refused: some trace hours have no carbon / weather / price value at a site.

    Attributes
    ----------
    gaps : list of :class:`SiteGap`
    """

    def __init__(self, gaps: list[SiteGap], unfillable: bool = False):
        self.gaps = gaps
        total = sum(len(g.trace_hours) for g in gaps)
        how = ("the series has no value to fill from; leave the site out or ingest its data"
               if unfillable else "choose a fill method (forward fill or interpolation), shift "
               "the alignment offset, or leave the site out")
        super().__init__(f"site data missing for some trace hours ({total} hours in "
                         f"{len(gaps)} site series): "
                         + "; ".join(g.describe() for g in gaps) + f". Nothing was fitted: {how}")


def site_gaps(sources: list[SiteSources], series: dict, hours: pd.DatetimeIndex,
              offset_days: int = 0, fill: str = "none") -> list[SiteGap]:
    """Every series of every site that has no value for some trace hours (pure, no fitting).

    Parameters as :func:`build_sites`; with ``fill`` other than ``none``, the hours that stay
    empty after filling (a series with no value at all). Returns one :class:`SiteGap` per
    (site, series) with a gap, in the order of ``sources``.
    """
    out = []
    for src in sources:
        for key in src.series_keys():
            values, site_hours = _aligned(series[key], hours, offset_days, fill)
            miss = np.isnan(values)
            if miss.any():
                out.append(SiteGap(src.name, key[0], key[1], tuple(hours[miss]),
                                   tuple(site_hours[miss])))
    return out


@dataclass(frozen=True)
class SiteSources:
    """Which stored series one dispatch site uses.

    Attributes
    ----------
    name : carbon site (balancing authority or Green-DCC zone)
    basis : carbon-intensity basis used (avg, LCA or direct)
    weather_site : site whose weather series gives the outdoor temperature (None: no weather)
    price_site : site whose price series is used (None: no prices)
    alias_of : the stored site whose carbon series ``name`` names (the same file published
        under two codes, e.g. SustainDC CISO and CA), None when ``name`` is stored itself
    """

    name: str
    basis: str
    weather_site: str | None
    price_site: str | None
    alias_of: str | None = None

    def series_keys(self) -> list[tuple[str, str, str | None]]:
        """``(table, site, basis)`` of every stored series this site needs."""
        keys = [("carbon_intensity", self.name, self.basis)]
        if self.weather_site is not None:
            keys.append(("weather", self.weather_site, None))
        if self.price_site is not None:
            keys.append(("prices", self.price_site, None))
        return keys

    def note(self) -> list[str]:
        """What the site uses, for the page and the CLI document."""
        same = f" (the series stored as {self.alias_of})" if self.alias_of else ""
        out = [f"{self.name}: carbon basis {self.basis}{same}, "
               + (f"weather from {self.weather_site}" if self.weather_site else "no weather")]
        if self.price_site:
            out.append(f"{self.name}: prices from {self.price_site}")
        return out


def site_sources(catalog: pd.DataFrame, names: list[str], basis: str | None = None
                 ) -> list[SiteSources]:
    """Choose each site's series from the store's site catalog (pure).

    Weather: a weather series of the same site name (Green-DCC zones), else the SustainDC city
    of :data:`WEATHER_FOR_SITE`. Prices: the same site name, else the Green-DCC zone of
    :data:`PRICE_FOR_SITE`. A site code that is an alias of a stored site (catalog
    ``alias_of``, e.g. CISO for the series stored as CA) falls back to that site's weather city
    and price zone. Carbon basis: ``basis`` if given, else avg, LCA, direct in that order of
    preference.

    Parameters
    ----------
    catalog : :func:`analytics.store.site_catalog` frame (``tbl``, ``site``, ``basis``,
        optional ``alias_of``)
    names : carbon site names

    Raises KeyError for a site without carbon intensity.
    """
    def has(table: str, site: str | None) -> bool:
        return site is not None and bool(((catalog["tbl"] == table)
                                          & (catalog["site"] == site)).any())

    out = []
    for name in names:
        carbon = catalog[(catalog["tbl"] == "carbon_intensity") & (catalog["site"] == name)]
        if carbon.empty:
            raise KeyError(f"no carbon intensity for site {name!r}; ingest its carbon file")
        bases = carbon["basis"].tolist()
        use = basis if basis in bases else next(b for b in BASIS_PREFERENCE + tuple(bases)
                                                if b in bases)
        of = carbon["alias_of"].dropna() if "alias_of" in carbon else pd.Series([], dtype=str)
        alias_of = str(of.iloc[0]) if len(of) == len(carbon) else None  # only ever an alias
        weather = name if has("weather", name) else (
            WEATHER_FOR_SITE.get(name) or WEATHER_FOR_SITE.get(alias_of or ""))
        price = name if has("prices", name) else (
            PRICE_FOR_SITE.get(name) or PRICE_FOR_SITE.get(alias_of or ""))
        out.append(SiteSources(name, use, weather if has("weather", weather) else None,
                               price if has("prices", price) else None, alias_of))
    return out


def build_sites(sources: list[SiteSources], series: dict[tuple[str, str, str | None], pd.DataFrame],
                hours: pd.DatetimeIndex, offset_days: int = 0,
                capacity: dict[str, float] | None = None,
                max_share: dict[str, float] | None = None, fill: str = "none") -> list[Site]:
    """Sites with their hourly series aligned to the trace hours (pure).

    Parameters
    ----------
    sources : from :func:`site_sources`
    series : ``(table, site, basis) -> frame (ts, value)`` for every key of every source's
        :meth:`SiteSources.series_keys` (:func:`analytics.store.site_hourly`)
    hours : DatetimeIndex (H,), trace hours to align to (day-of-year and hour)
    offset_days : days added to the day-of-year alignment
    capacity, max_share : per-site limits (default unlimited)
    fill : one of :data:`FILL_METHODS`; ``none`` leaves missing hours NaN (see
        :func:`site_gaps` to name them)

    Returns the sites, each with arrays of shape (H,).
    """
    sites = []
    for src in sources:
        ci = _aligned(series[("carbon_intensity", src.name, src.basis)], hours, offset_days,
                      fill)[0]
        temp = None if src.weather_site is None else _aligned(
            series[("weather", src.weather_site, None)], hours, offset_days, fill)[0]
        price = None if src.price_site is None else _aligned(
            series[("prices", src.price_site, None)], hours, offset_days, fill)[0]
        sites.append(Site(src.name, ci, temp, price, (capacity or {}).get(src.name, np.inf),
                          (max_share or {}).get(src.name, 1.0)))
    return sites
