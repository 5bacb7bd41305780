"""Hourly wholesale electricity prices (USD/MWh) -> ``prices``.

Source: Green-DCC ``electricity_prices/standardized/<zone>_electricity_prices_<year>.csv(.gz)``
(HewlettPackard/green-dcc; prices from ENTSO-E, CAISO, ERCOT, AEMO and others, converted to USD and
UTC upstream). Columns ``Datetime (UTC), Datetime (Local), Price (USD/MWh)``; ``site`` = the zone
from the file name. Prices can be negative (renewable surplus hours) and are kept as they are.
Times come from ``Datetime (UTC)`` (written with ``+00:00``), so ``--tz`` does not apply; the
``Datetime (Local)`` column is not read.
A blank price is kept empty and absent hours are reported, both as notes
(:mod:`analytics.ingest.hourly`).
"""

from __future__ import annotations

import polars as pl

from analytics.ingest.formats._common import (
    FormatError,
    Parsed,
    check_monotone,
    check_unique,
    file_stem,
    header_fields,
    parse_timestamps,
    read_csv_checked,
    site_assumption,
)
from analytics.ingest.hourly import absent_hours_notes, blank_note, check_hourly_spacing


class GreenDCCPrices:
    """Green-DCC hourly electricity prices -> ``prices``."""

    NAME = "greendcc_prices"
    TABLE = "prices"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        fields = header_fields(head)
        return "Datetime (UTC)" in fields and "Price (USD/MWh)" in fields

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(path, display, {"Datetime (UTC)": pl.String},
                                 optional={"Price (USD/MWh)": pl.Float64})
        if "Price (USD/MWh)" not in frame.columns:
            raise FormatError(display, 1, "Price (USD/MWh)", "missing column 'Price (USD/MWh)'")
        frame = parse_timestamps(frame, "Datetime (UTC)", display, "%Y-%m-%d %H:%M:%S%z")
        check_monotone(frame, display, 0.0, "Datetime (UTC)")
        check_unique(frame, ["ts"], display, "Datetime (UTC)")
        check_hourly_spacing(frame, "Datetime (UTC)", display)
        site = opts.site or file_stem(display).split("_electricity_prices")[0]
        out = frame.select(
            pl.lit(site).alias("site"), "ts", pl.col("Price (USD/MWh)").alias("usd_per_mwh")
        )
        n_neg = int((out["usd_per_mwh"] < 0).sum())
        warnings = []
        if n_neg:
            warnings.append(f"{n_neg} hours have negative prices (kept)")
        blank = blank_note(frame, "Price (USD/MWh)", "Price (USD/MWh)", "price")
        warnings += [blank] if blank else []
        warnings += absent_hours_notes(frame, "Datetime (UTC)")
        return Parsed("prices", GreenDCCPrices.NAME, out, display, 3600.0, tuple(warnings),
                      sources={"ts": "Datetime (UTC)", "usd_per_mwh": "Price (USD/MWh)"},
                      assumptions=site_assumption(opts, site, "the file name"))
