"""Hourly outside weather -> ``weather`` (temperature °C, relative humidity %).

* EnergyPlus ``.epw(.gz)`` typical-meteorological-year files (SustainDC / dc-rl ``Weather/``;
  climate.onebuilding.org). 8 header lines, then 8,760 hourly records; field 7 dry-bulb °C,
  field 9 relative humidity %. Hour ``h`` (1-24) covers local standard time ``h-1 .. h``; the row
  is stamped at the hour's start and moved to UTC with the time-zone offset of the ``LOCATION``
  line. A TMY's year field mixes years month by month, so every record is given the year of
  :class:`analytics.config.ParseOptions` (default 2022, the SustainDC carbon year). EPW missing
  markers (99.9 °C, 999 %) become empty values. ``site`` = the file name's station part.
* Green-DCC Open-Meteo ``<zone>_<year>.json(.gz)``: ``hourly.time`` in local time with the file's
  ``utc_offset_seconds``: one fixed offset for the whole file (the Green-DCC files hold 8,760
  distinct, contiguous hours and keep 02:00 on the spring-forward day, e.g. DE-LU 2023-03-26,
  so no daylight-saving shift is in them), ``temperature_2m`` °C and ``relative_humidity_2m`` %.
  ``site`` = the zone from the file name.

Both carry their own offset, so ``--tz`` does not apply.

Empty values (EPW missing markers, JSON ``null``) and absent hours are reported as notes
(:mod:`analytics.ingest.hourly`), never filled at ingest.
"""

from __future__ import annotations

import csv
import json
import math
from datetime import datetime, timedelta

import polars as pl

from analytics.ingest.formats._common import (
    ROW,
    FormatError,
    Parsed,
    file_stem,
    open_text,
    site_assumption,
    wide_csv_fields,
)
from analytics.ingest.hourly import absent_hours_notes, blank_note
from analytics.ingest.rawfile import GZIP_FAULTS

#: EPW field labels as the notes and refusals name them (0-based index -> label)
_EPW_FIELD = {6: "field 7 dry bulb", 8: "field 9 relative humidity"}


class EPW:
    NAME = "epw_weather"
    TABLE = "weather"
    SOURCE_COLUMNS = {"temp_c": "field 7 dry bulb", "rh_pct": "field 9 relative humidity"}

    @staticmethod
    def detect(name: str, head: str) -> bool:
        return head.startswith("LOCATION,") and "DATA PERIODS" in head

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        ts, temp, rh, rows = [], [], [], []
        tz_h = 0.0
        lineno = 0
        try:
            with open_text(path) as fh, wide_csv_fields():
                reader = csv.reader(fh)
                for row in reader:
                    start, lineno = lineno + 1, reader.line_num
                    if lineno == 1:
                        try:
                            tz_h = float(row[8])
                        except (IndexError, ValueError) as exc:
                            raise FormatError(display, 1, 9, "LOCATION line has no time zone") \
                                from exc
                        continue
                    if lineno == 8 and row and row[0].strip().upper() == "DATA PERIODS":
                        _check_hourly_records(row, display)
                    if lineno <= 8 or not row:
                        continue
                    if any("\n" in cell or "\r" in cell for cell in row):  # EPW never quotes
                        raise FormatError(display, start, 1, "a quote opens on this line and is "
                                          f"not closed where the record should end (line {lineno})")
                    if len(row) != 35:
                        raise FormatError(display, lineno, min(len(row), 35) + 1,
                                          f"record has {len(row)} fields, EPW needs 35")
                    try:
                        month, day, hour = int(row[1]), int(row[2]), int(row[3])
                    except ValueError as exc:
                        raise FormatError(display, lineno, 2, "month/day/hour not integers") \
                            from exc
                    if not 1 <= hour <= 24:  # EPW hours are 1-24 (hour 24 ends the day)
                        raise FormatError(display, lineno, "field 4 hour",
                                          f"hour {hour} is outside 1-24 (EPW hours run 1-24)")
                    try:
                        stamp = datetime(opts.year, month, day) + timedelta(hours=hour - 1 - tz_h)
                    except ValueError as exc:
                        raise FormatError(display, lineno, 2, f"bad date: {exc}") from exc
                    vals = []
                    for idx, missing in ((6, 99.9), (8, 999.0)):
                        try:
                            v = float(row[idx])
                        except ValueError as exc:
                            raise FormatError(display, lineno, _EPW_FIELD[idx],
                                              f"{row[idx]!r} is not a number") from exc
                        if not math.isfinite(v):  # inf / 1e400 is no missing marker (99.9)
                            raise FormatError(display, lineno, _EPW_FIELD[idx],
                                              f"{row[idx]!r} is not a finite number")
                        vals.append(None if v >= missing else v)
                    ts.append(stamp)
                    rows.append(lineno - 2)  # __row: the notes name line ``row + 2``
                    temp.append(vals[0])
                    rh.append(vals[1])
        except GZIP_FAULTS as exc:
            raise FormatError(display, lineno + 1, 1, f"gzip stream is truncated ({exc})") from exc
        except csv.Error as exc:  # e.g. a field over the csv module's 128 KiB limit
            raise FormatError(display, lineno + 1, 1, f"malformed CSV: {exc}") from exc
        if not ts:
            raise FormatError(display, 9, 1, "no hourly records after the 8 header lines")
        site = opts.site or file_stem(display)
        out = pl.DataFrame(
            {"site": [site] * len(ts), "ts": ts, "temp_c": temp, "rh_pct": rh, ROW: rows},
            schema={"site": pl.String, "ts": pl.Datetime("us"), "temp_c": pl.Float64,
                    "rh_pct": pl.Float64, ROW: pl.Int64},
        ).sort("ts")
        _refuse_repeated_hour(out, display)
        notes = _gap_notes(out, (("temp_c", "field 7 dry bulb"),
                                 ("rh_pct", "field 9 relative humidity")),
                           "fields 2-4 month/day/hour")
        assumed = (f"year assumed: typical-year records stamped in {opts.year} (their own year "
                   "field mixes years; give --year)",
                   f"time zone: local standard time with the LOCATION line's fixed UTC offset "
                   f"{tz_h:+g} h (EPW has no daylight saving)",
                   *site_assumption(opts, site, "the file name"))
        return Parsed("weather", EPW.NAME, out, display, 3600.0, tuple(notes),  # __row: lines
                      sources={"ts": "fields 2-4 month/day/hour", **EPW.SOURCE_COLUMNS},
                      assumptions=assumed)


class OpenMeteo:
    NAME = "openmeteo_weather"
    TABLE = "weather"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        return head.lstrip().startswith("{") and '"hourly"' in head and '"latitude"' in head

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        try:
            with open_text(path) as fh:
                doc = json.load(fh)
        except json.JSONDecodeError as exc:
            raise FormatError(display, exc.lineno, exc.colno, f"invalid JSON: {exc.msg}") from exc
        except GZIP_FAULTS as exc:
            raise FormatError(display, 1, 1, f"gzip stream is truncated ({exc})") from exc
        hourly = doc.get("hourly") if isinstance(doc, dict) else None
        if not isinstance(hourly, dict):
            raise FormatError(display, 1, "hourly", "no 'hourly' object")
        for key in ("time", "temperature_2m"):
            if key not in hourly:
                raise FormatError(display, 1, f"hourly.{key}", f"missing 'hourly.{key}'")
        n = len(hourly["time"])
        rh = hourly.get("relative_humidity_2m", [None] * n)
        for key, arr in (("temperature_2m", hourly["temperature_2m"]),
                         ("relative_humidity_2m", rh)):
            if len(arr) != n:
                raise FormatError(display, 1, f"hourly.{key}",
                                  f"has {len(arr)} values, hourly.time has {n}")
        _check_numbers(hourly, ("temperature_2m", "relative_humidity_2m"), display)
        offset_s = doc.get("utc_offset_seconds")
        if not isinstance(offset_s, int | float | None) or isinstance(offset_s, bool):
            raise FormatError(display, 1, "utc_offset_seconds", f"{offset_s!r} is not a number")
        frame = pl.DataFrame(
            {"time": hourly["time"], "temp_c": hourly["temperature_2m"], "rh_pct": rh},
            schema={"time": pl.String, "temp_c": pl.Float64, "rh_pct": pl.Float64},
            strict=False,
        )
        local = frame["time"].str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M", strict=False)
        if local.is_null().any():
            idx = int(local.is_null().arg_true()[0])
            raise FormatError(display, 1, f"hourly.time[{idx}]",
                              f"{frame['time'][idx]!r} is not YYYY-MM-DDTHH:MM")
        twice = local.is_duplicated()
        if twice.any():
            idx = int(twice.arg_true()[1])
            raise FormatError(display, 1, f"hourly.time[{idx}]",
                              f"{frame['time'][idx]} appears twice; one value per hour expected")
        site = opts.site or file_stem(display).rsplit("_", 1)[0]
        out = frame.select(
            pl.lit(site).alias("site"),
            (local - timedelta(seconds=offset_s or 0)).alias("ts"),
            "temp_c",
            "rh_pct",
        )
        zone = (f"local times moved to UTC with the file's fixed offset {offset_s / 3600:+.1f} h "
                "(daylight saving not modelled)" if offset_s is not None else
                "no utc_offset_seconds in the file: times read as UTC")
        notes = _gap_notes(out, (("temp_c", "hourly.temperature_2m"),
                                 ("rh_pct", "hourly.relative_humidity_2m")), "hourly.time")
        return Parsed("weather", OpenMeteo.NAME, out, display, 3600.0, tuple(notes),
                      sources={"ts": "hourly.time", "temp_c": "hourly.temperature_2m",
                               "rh_pct": "hourly.relative_humidity_2m"},
                      assumptions=(f"time zone: {zone}",
                                   *site_assumption(opts, site, "the file name")))


def _check_hourly_records(row: list[str], display: str) -> None:
    """Refuse a sub-hourly EPW (line 8, ``DATA PERIODS``: field 3 is the number of records per
    hour; EnergyPlus Auxiliary Programs, "EnergyPlus Weather File (EPW) Data Dictionary"),
    naming it: headroom's weather table holds one value per hour."""
    try:
        per_hour = int(row[2])
    except (IndexError, ValueError) as exc:
        raise FormatError(display, 8, 3, "DATA PERIODS line has no records-per-hour "
                          "field") from exc
    if per_hour != 1:
        raise FormatError(display, 8, 3, (
            f"a sub-hourly EPW ({per_hour} records per hour, every {60 // max(per_hour, 1)} "
            "min; DATA PERIODS field 3): headroom reads hourly weather, one record per hour; "
            "use the hourly EPW of the site, or average each hour's records first"))


def _refuse_repeated_hour(frame: pl.DataFrame, display: str) -> None:
    """Refuse an EPW record whose month/day/hour repeats an earlier one (one value per hour,
    as the hourly carbon and price readers require), naming the later record's line."""
    twice = frame.filter(pl.col("ts").is_duplicated()).sort(ROW)
    if twice.height:
        first = twice.filter(pl.col("ts") == twice["ts"][0])
        raise FormatError(display, int(first[ROW][1]) + 2, "fields 2-4 month/day/hour",
                          f"the hour of line {int(first[ROW][0]) + 2} appears twice; one value "
                          "per hour expected")


def _check_numbers(hourly: dict, keys: tuple[str, ...], display: str) -> None:
    """Refuse a value of an ``hourly`` array that is neither a number nor null (a string
    would otherwise become an empty reading unnoticed). JSON has no line per value: the
    position is ``hourly.<key>[index]``."""
    for key in keys:
        for idx, v in enumerate(hourly.get(key) or ()):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise FormatError(display, 1, f"hourly.{key}[{idx}]",
                                  f"{str(v)[:40]!r} is not a number")


def _gap_notes(frame: pl.DataFrame, values: tuple[tuple[str, str], ...], time_col: str
               ) -> list:
    """Notes on empty values of each ``(column, name in the file)`` and on absent hours."""
    words = {"temp_c": "temperature", "rh_pct": "relative humidity"}
    notes = [blank_note(frame, col, name, f"{words[col]} (missing marker or null)")
             for col, name in values]
    return [n for n in notes if n] + absent_hours_notes(frame, time_col)
