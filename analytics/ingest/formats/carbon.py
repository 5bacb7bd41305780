"""Hourly grid carbon intensity (gCO2/kWh) -> ``carbon_intensity``.

* SustainDC / dc-rl ``CarbonIntensity/<BA>_NG_&_avgCI.csv`` (HewlettPackard/dc-rl, MIT; data from
  U.S. EIA EBA bulk data, public domain): hourly 2022 UTC generation mix by fuel (MWh) and
  ``avg_CI`` = generation-weighted average intensity. ``basis = 'avg'``; ``site`` = the balancing
  authority from the file name (``AZPS``, ``CISO``, ...). One file's first header cell is empty
  instead of ``timestamp``; it is read as ``timestamp``.
* Electricity Maps hourly exports, as Green-DCC ships them (``carbon_intensity/<zone>_<year>_
  hourly.csv(.gz)``, HewlettPackard/green-dcc, MIT code) and as the Electricity Maps data portal
  writes them since 2024: ``Datetime (UTC)`` and two intensities per hour, ``direct``
  (combustion only) and ``LCA`` (life-cycle). Old names (``Zone Id``, ``Carbon Intensity
  gCO₂eq/kWh (LCA)``) and 2024 names (``Zone id``, ``Carbon intensity gCO₂eq/kWh (Life
  cycle)``) are both recognised (:data:`BASIS_COLUMNS`; case, spaces and ``CO2``/``CO₂``
  ignored). Every basis present is stored, one row per hour and basis (a zone-year gives
  2 x 8,760 rows), unless ``ParseOptions.carbon_basis`` keeps one; a note names the column each
  basis was read from. ``site`` = ``Zone id`` (else the file name's zone). A file with neither
  intensity column is refused at line 1, naming the columns looked for and the header found.

Blank intensities are kept as empty values and absent hours are reported, both as notes
(:mod:`analytics.ingest.hourly`); nothing is filled at ingest.

Both sources are UTC (SustainDC writes ``+00:00``; the Electricity Maps column is
``Datetime (UTC)``): ``--tz`` does not apply; a value with an offset is converted with it.
"""

from __future__ import annotations

import re

import polars as pl

from analytics.config import CARBON_BASES
from analytics.ingest.formats._common import (
    FormatError,
    Note,
    Parsed,
    check_monotone,
    check_nonnegative,
    check_unique,
    file_stem,
    header_fields,
    parse_timestamps,
    read_csv_checked,
    read_head,
    site_assumption,
)
from analytics.ingest.hourly import absent_hours_notes, blank_note, check_hourly_spacing

_TIME = ("Datetime (UTC)",)
_ZONE = ("Zone id", "Zone Id")
#: Intensity column names per basis, old (Green-DCC's 2023 files, Electricity Maps before 2024)
#: and new (Electricity Maps 2024+ exports); matched ignoring case, spaces, ``-``/``_`` and
#: ``CO2`` vs ``CO₂`` (see :func:`header_key`).
BASIS_COLUMNS = {
    "LCA": ("Carbon Intensity gCO₂eq/kWh (LCA)", "Carbon intensity gCO₂eq/kWh (Life cycle)",
            "Carbon Intensity gCO₂eq/kWh (life cycle assessment)"),
    "direct": ("Carbon Intensity gCO₂eq/kWh (direct)", "Carbon intensity gCO₂eq/kWh (direct)"),
}
BASIS_WORDS = {"LCA": "life-cycle", "direct": "direct"}
_BASIS_DETAIL = {"LCA": "life-cycle", "direct": "combustion only"}


def header_key(name: str) -> str:
    """A header name compared loosely: lower case, ``CO₂`` as ``co2``, no spaces, ``-`` or ``_``.

    >>> header_key("Carbon intensity gCO₂eq/kWh (Life cycle)")
    'carbonintensitygco2eq/kwh(lifecycle)'
    """
    return re.sub(r"[\s_\-]+", "", name.replace("₂", "2").lower())


def _find(header: list[str], names: tuple[str, ...]) -> str | None:
    """The header cell matching one of ``names`` (by :func:`header_key`), as written."""
    wanted = {header_key(n) for n in names}
    return next((h for h in header if header_key(h) in wanted), None)


class SustainDC:
    NAME = "sustaindc_carbon"
    TABLE = "carbon_intensity"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        fields = header_fields(head)
        return bool(fields) and fields[0] in ("timestamp", "") and "avg_CI" in fields

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(
            path, display, {"timestamp": pl.String}, optional={"avg_CI": pl.Float64},
            rename={"": "timestamp"},
        )
        if "avg_CI" not in frame.columns:
            raise FormatError(display, 1, "avg_CI", "missing column 'avg_CI'")
        check_nonnegative(frame.filter(pl.col("avg_CI").is_not_null()), ["avg_CI"], display)
        frame = parse_timestamps(frame, "timestamp", display, "%Y-%m-%d %H:%M:%S%z")
        check_monotone(frame, display, 0.0, "timestamp")
        check_unique(frame, ["ts"], display, "timestamp")
        check_hourly_spacing(frame, "timestamp", display)
        m = re.match(r"([A-Za-z0-9-]+?)_NG_", file_stem(display))
        site = opts.site or (m.group(1) if m else file_stem(display))
        out = frame.select(
            pl.lit(site).alias("site"),
            "ts",
            pl.col("avg_CI").alias("gco2_per_kwh"),
            pl.lit("avg").alias("basis"),
        )
        warnings = ["basis avg (generation-weighted, EIA EBA 2022)"]
        blank = blank_note(frame, "avg_CI", "avg_CI",
                           "avg_CI (EIA reported no generation mix for the hour)")
        warnings += [blank] if blank else []
        warnings += absent_hours_notes(frame, "timestamp")
        return Parsed("carbon_intensity", SustainDC.NAME, out, display, 3600.0, tuple(warnings),
                      sources={"ts": "timestamp", "gco2_per_kwh": "avg_CI"},
                      assumptions=site_assumption(opts, site, "the balancing authority in the "
                                                  "file name" if m else "the file name"))


class GreenDCC:
    NAME = "greendcc_carbon"
    TABLE = "carbon_intensity"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        keys = [header_key(f) for f in header_fields(head)]
        return header_key(_TIME[0]) in keys and (
            any(k.startswith("carbonintensity") for k in keys)
            or any(header_key(z) in keys for z in _ZONE))

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        header = header_fields(read_head(path, display))
        time_col = _find(header, _TIME)
        if time_col is None:
            raise FormatError(display, 1, "Datetime (UTC)",
                              f"missing column 'Datetime (UTC)'; the header has {header}")
        zone_col = _find(header, _ZONE)
        found = {b: _find(header, names) for b, names in BASIS_COLUMNS.items()}
        use = _chosen_bases(found, opts.carbon_basis, header, display)
        frame = read_csv_checked(
            path, display, {time_col: pl.String},
            optional={**({zone_col: pl.String} if zone_col else {}),
                      **{found[b]: pl.Float64 for b in use}},
        )
        for b in use:
            check_nonnegative(frame.filter(pl.col(found[b]).is_not_null()), [found[b]], display)
        frame = parse_timestamps(frame, time_col, display, "%Y-%m-%d %H:%M:%S")
        check_monotone(frame, display, 0.0, time_col)
        zone = zone_col if zone_col else None
        check_unique(frame, [zone, "ts"] if zone else ["ts"], display, time_col)
        check_hourly_spacing(frame, time_col, display, (zone,) if zone else ())
        default_site = file_stem(display).split("_")[0]
        site = pl.lit(opts.site) if opts.site else (
            pl.col(zone).fill_null(default_site) if zone else pl.lit(default_site))
        parts, notes = [], []
        for b in use:
            part = frame.with_columns(site.alias("site"))
            parts.append(part.select("site", "ts", pl.col(found[b]).alias("gco2_per_kwh"),
                                     pl.lit(b).alias("basis")))
            notes.append(Note(f"basis {b} ({_BASIS_DETAIL[b]}) read from this column"
                              + (", one row per hour and basis" if len(use) > 1 else ""),
                              column=found[b]))
            blank = blank_note(frame, found[b], found[b], f"{BASIS_WORDS[b]} carbon intensity")
            notes += [blank] if blank else []
        absent = [b for b in BASIS_COLUMNS if found[b] is None]
        if absent:
            notes.append(f"no {' / '.join(BASIS_WORDS[b] for b in absent)} intensity column in "
                         f"the file; only basis {', '.join(use)} stored")
        with_site = frame.with_columns(site.alias("site"))
        notes += absent_hours_notes(with_site, time_col, ("site",))
        sources = {"ts": time_col, "gco2_per_kwh": " and ".join(
            f"{found[b]} (basis {b})" for b in use), "basis": "the intensity column's name"}
        if zone and not opts.site:
            sources["site"] = zone
        assumed = () if zone else site_assumption(opts, default_site, "the file name's zone")
        return Parsed("carbon_intensity", GreenDCC.NAME, pl.concat(parts), display, 3600.0,
                      tuple(notes), sources=sources, assumptions=assumed)


def _chosen_bases(found: dict[str, str | None], wanted: str, header: list[str],
                  display: str) -> list[str]:
    """Bases to store: every one found (``wanted == "all"``) or the one asked for.

    Raises FormatError at line 1 naming the columns looked for and the header found when no
    intensity column (or not the asked basis) is in the file."""
    if wanted not in CARBON_BASES:
        raise FormatError(display, 1, 1, f"carbon basis {wanted!r}: choose one of "
                                         f"{', '.join(CARBON_BASES)}")
    bases = [b for b in BASIS_COLUMNS if found[b] and wanted in ("all", b)]
    if not bases:
        looked = [n for b, names in BASIS_COLUMNS.items() if wanted in ("all", b)
                  for n in names]
        raise FormatError(
            display, 1, "Carbon intensity",
            f"no {'' if wanted == 'all' else BASIS_WORDS[wanted] + ' '}carbon-intensity column; "
            f"looked for {looked} (case, spaces and CO2/CO₂ ignored); the header has {header}")
    return bases
