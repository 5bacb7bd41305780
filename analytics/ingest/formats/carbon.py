"""Hourly grid carbon intensity (gCO2/kWh) -> ``carbon_intensity``.

* SustainDC / dc-rl ``CarbonIntensity/<BA>_NG_&_avgCI.csv`` (HewlettPackard/dc-rl, MIT; data from
  U.S. EIA EBA bulk data, public domain): hourly 2022 UTC generation mix by fuel (MWh) and
  ``avg_CI`` = generation-weighted average intensity. ``basis = 'avg'``; ``site`` = the balancing
  authority from the file name (``AZPS``, ``CISO``, ...). One file's first header cell is empty
  instead of ``timestamp``; it is read as ``timestamp``.
* Green-DCC ``carbon_intensity/<zone>_<year>_hourly.csv(.gz)`` (HewlettPackard/green-dcc, MIT code;
  data from Electricity Maps): ``Datetime (UTC)`` and two intensities per hour, ``direct``
  (combustion only) and ``LCA`` (life-cycle). Both are stored, one row per basis, so a zone-year
  gives 2 x 8,760 rows; ``site`` = ``Zone Id``.

Both sources are UTC (SustainDC writes ``+00:00``; Green-DCC names the column ``Datetime (UTC)``):
``--tz`` does not apply; a value with an offset is converted with it.
"""

from __future__ import annotations

import re

import polars as pl

from analytics.ingest.formats._common import (
    FormatError,
    Parsed,
    check_monotone,
    check_nonnegative,
    check_unique,
    file_stem,
    header_fields,
    parse_timestamps,
    read_csv_checked,
)

_GDCC_DIRECT = "Carbon Intensity gCO₂eq/kWh (direct)"
_GDCC_LCA = "Carbon Intensity gCO₂eq/kWh (LCA)"


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
        gaps = int(frame["avg_CI"].null_count())
        frame = parse_timestamps(frame, "timestamp", display, "%Y-%m-%d %H:%M:%S%z")
        check_monotone(frame, display, 0.0, "timestamp")
        check_unique(frame, ["ts"], display, "timestamp")
        m = re.match(r"([A-Za-z0-9-]+?)_NG_", file_stem(display))
        site = opts.site or (m.group(1) if m else file_stem(display))
        out = frame.select(
            pl.lit(site).alias("site"),
            "ts",
            pl.col("avg_CI").alias("gco2_per_kwh"),
            pl.lit("avg").alias("basis"),
        )
        warnings = [f"site {site!r}; basis avg (generation-weighted, EIA EBA 2022)"]
        if gaps:
            warnings.append(f"{gaps} hours have no avg_CI in the source (EIA reported no "
                            "generation mix); kept as empty values, not filled")
        return Parsed("carbon_intensity", SustainDC.NAME, out, display, 3600.0, tuple(warnings))


class GreenDCC:
    NAME = "greendcc_carbon"
    TABLE = "carbon_intensity"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        fields = header_fields(head)
        return "Datetime (UTC)" in fields and _GDCC_DIRECT in fields

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(
            path, display,
            {"Datetime (UTC)": pl.String, "Zone Id": pl.String, _GDCC_DIRECT: pl.Float64,
             _GDCC_LCA: pl.Float64},
        )
        check_nonnegative(frame, [_GDCC_DIRECT, _GDCC_LCA], display)
        frame = parse_timestamps(frame, "Datetime (UTC)", display, "%Y-%m-%d %H:%M:%S")
        check_monotone(frame, display, 0.0, "Datetime (UTC)")
        check_unique(frame, ["Zone Id", "ts"], display, "Datetime (UTC)")
        site = pl.lit(opts.site) if opts.site else pl.col("Zone Id")
        direct = frame.select(site.alias("site"), "ts",
                              pl.col(_GDCC_DIRECT).alias("gco2_per_kwh"),
                              pl.lit("direct").alias("basis"))
        lca = frame.select(site.alias("site"), "ts",
                           pl.col(_GDCC_LCA).alias("gco2_per_kwh"),
                           pl.lit("LCA").alias("basis"))
        out = pl.concat([direct, lca])
        return Parsed(
            "carbon_intensity", GreenDCC.NAME, out, display, 3600.0,
            ("two rows per hour: basis 'direct' (combustion) and 'LCA' (life-cycle), "
             "Electricity Maps via Green-DCC",),
        )
