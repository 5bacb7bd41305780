"""Hourly wholesale electricity prices (USD/MWh) -> ``prices``.

Source: Green-DCC ``electricity_prices/standardized/<zone>_electricity_prices_<year>.csv(.gz)``
(HewlettPackard/green-dcc; prices from ENTSO-E, CAISO, ERCOT, AEMO and others, converted to USD and
UTC upstream). Columns ``Datetime (UTC), Datetime (Local), Price (USD/MWh)``; ``site`` = the zone
from the file name. Prices can be negative (renewable surplus hours) and are kept as they are.
Times come from ``Datetime (UTC)`` (written with ``+00:00``), so ``--tz`` does not apply; the
``Datetime (Local)`` column is not read.
"""

from __future__ import annotations

import polars as pl

from analytics.ingest.formats._common import (
    Parsed,
    check_monotone,
    check_unique,
    file_stem,
    header_fields,
    parse_timestamps,
    read_csv_checked,
)


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
        frame = read_csv_checked(
            path, display, {"Datetime (UTC)": pl.String, "Price (USD/MWh)": pl.Float64}
        )
        frame = parse_timestamps(frame, "Datetime (UTC)", display, "%Y-%m-%d %H:%M:%S%z")
        check_monotone(frame, display, 0.0, "Datetime (UTC)")
        check_unique(frame, ["ts"], display, "Datetime (UTC)")
        site = opts.site or file_stem(display).split("_electricity_prices")[0]
        out = frame.select(
            pl.lit(site).alias("site"), "ts", pl.col("Price (USD/MWh)").alias("usd_per_mwh")
        )
        n_neg = int((out["usd_per_mwh"] < 0).sum())
        warnings = [f"site {site!r}"]
        if n_neg:
            warnings.append(f"{n_neg} hours have negative prices (kept)")
        return Parsed("prices", GreenDCCPrices.NAME, out, display, 3600.0, tuple(warnings))
