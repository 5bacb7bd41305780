"""Users' own files already in a canonical schema (CSV, CSV.gz or Parquet).

Name the columns as in the store (``analytics.schema.CANONICAL``); the table is chosen
by which required set is present:

================  =========================================  ===================================
table             required columns                           optional columns
================  =========================================  ===================================
requests          ts, prompt_tokens, completion_tokens       model, failed, session_id, latency_s
demand_series     ts, bin_s, tokens                          requests
carbon_intensity  site, ts, gco2_per_kwh                     basis (avg / LCA / direct)
weather           site, ts, temp_c                           rh_pct
prices            site, ts, usd_per_mwh
================  =========================================  ===================================

A requests file's ``prompt_tokens`` / ``completion_tokens`` columns must be there, but a cell
may be empty (an unknown count): it stays empty (NULL, never 0) with a note naming the lines.

``ts`` is ISO 8601 text (``2024-05-10 12:00:00``, ``T`` or space, optional fraction and
``+hh:mm`` / ``Z`` offset) or, in Parquet, a timestamp column. A value with an offset is converted
to UTC with it; one without is UTC, or local time in ``ParseOptions.tz`` (``--tz``) when given,
converted with the repeated / skipped DST hour handled (:mod:`analytics.ingest.localtime`; a
series' rows are taken in file order per site). Without ``--tz``, an hourly series whose time
steps back or repeats by up to an hour gets a warning naming the lines.

In the hourly site tables (carbon_intensity, weather, prices) a blank value is kept empty and
absent hours of each site (and basis) are reported, both as notes
(:mod:`analytics.ingest.hourly`).
"""

from __future__ import annotations

import re

import polars as pl

from analytics.ingest.fastcsv import Plan, carry_monotone
from analytics.ingest.formats._common import (
    _OFFSET,
    ROW,
    FormatError,
    NoteTally,
    Parsed,
    check_monotone,
    check_nonnegative,
    check_range,
    check_rules,
    header_fields,
    is_parquet,
    note_rows,
    offset_assumption,
    parse_timestamps,
    read_csv_checked,
    read_head,
    zone_assumption,
)
from analytics.ingest.hourly import absent_hours_notes, blank_note
from analytics.ingest.localtime import localize_sequence, note_clock_steps
from analytics.schema import CANONICAL, COLUMNS, REQUIRED, conform
from analytics.timelayouts import duckdb_has_offset, duckdb_iso

#: Required columns whose cells may be empty (an unknown count is NULL with a note, never 0).
_MAY_BE_EMPTY = {"requests": ("prompt_tokens", "completion_tokens")}


def _layout(value: str) -> str | None:
    """The ``read_csv`` layout of a time written ``YYYY-MM-DD hh:mm:ss`` with a space or ``T``
    and up to six fraction digits, without an offset (what DuckDB parses itself), or None."""
    got = re.fullmatch(r"\d{4}-\d{2}-\d{2}([ T])\d{2}:\d{2}:\d{2}(\.\d{1,6})?", value)
    if got is None:
        return None
    return f"%Y-%m-%d{got.group(1)}%H:%M:%S" + (".%f" if got.group(2) else "")


def _table_for(fields: list[str]) -> str | None:
    for table, req in REQUIRED.items():
        if all(c in fields for c in req):
            return table
    return None


#: per table: columns that tell a time series' entities apart, and whether each entity has one
#: row per time (then a repeated local time marks the repeated DST hour)
_SEQUENCES = {"requests": ([], False), "demand_series": ([], True),
              "carbon_intensity": (["site", "basis"], True), "weather": (["site"], True),
              "prices": (["site"], True)}


def _zone_assumption(frame: pl.DataFrame, tz: str | None, header_line: int) -> str | None:
    """The stated assumption about ``ts`` values without an offset (ISO 8601 text without ``Z``
    / ``+hh:mm``, counted over every row, or a Parquet timestamp without a zone): their zone is
    assumed (UTC, or ``tz``). None when every value carries its offset."""
    col = frame["ts"]
    if col.dtype == pl.String:
        reading = (f"read as local time in {tz}, converted to UTC" if tz else
                   "read as UTC (give --tz with the zone they were written in)")
        return offset_assumption(col, "the file's ts", reading, header_line,
                                 frame[ROW] if ROW in frame.columns else None)
    if isinstance(col.dtype, pl.Datetime) and col.dtype.time_zone is None:
        return zone_assumption(tz, "the file's ts")
    return None


def _ts_text(frame: pl.DataFrame, display: str, table: str, tz: str | None, notes: list,
             header_line: int) -> pl.DataFrame:
    """``ts`` as naive UTC: ISO 8601 text (an offset is honoured; without one the value is UTC,
    or local in ``tz``) or a Parquet timestamp (tz-aware: converted; naive: UTC, or ``tz``)."""
    by, unique = _SEQUENCES.get(table, ([], False))
    by = [c for c in by if c in frame.columns]
    col = frame["ts"]
    if col.dtype == pl.String:
        return parse_timestamps(frame, "ts", display, "%Y-%m-%d %H:%M:%S%.f", tz=tz, notes=notes,
                                by=by, unique=unique, header_line=header_line)
    if isinstance(col.dtype, pl.Datetime):
        if col.dtype.time_zone is not None:
            col = col.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
            return frame.with_columns(col.cast(pl.Datetime("us")).alias("ts"))
        frame = frame.with_columns(col.cast(pl.Datetime("us")).alias("ts"))
        if tz is None:
            return frame
        frame, found = localize_sequence(frame, "ts", tz, by=by, unique=unique,
                                         header_line=header_line)
        notes.extend(found)
        return frame
    raise FormatError(display, 1, "ts", f"ts column has type {col.dtype}, expected timestamps")


#: The value column of each hourly site table: blank cells are kept empty and reported.
SITE_VALUE = {"carbon_intensity": "gco2_per_kwh", "weather": "temp_c", "prices": "usd_per_mwh"}


def _site_notes(frame: pl.DataFrame, table: str, header_line: int) -> tuple:
    """Notes on blank values and absent hours of each site (and basis) series of a site table."""
    value = SITE_VALUE[table]
    blank = blank_note(frame, value, value, value, header_line)
    keys = ("site", "basis") if "basis" in frame.columns else ("site",)
    return (*([blank] if blank else []),
            *absent_hours_notes(frame, "ts", keys, header_line=header_line))


class Canonical:
    """A CSV / CSV.gz / Parquet file already in a canonical schema -> its table."""

    NAME = "canonical"
    TABLE = "any"
    LOCAL_TIMES = True  # times without an offset are local in --tz when given

    @staticmethod
    def stream_plan(display, head, opts, layout: bool = True) -> Plan | None:
        """The one road of a canonical ``requests`` CSV (:mod:`analytics.ingest.fastcsv`): the
        same rows, warnings and assumptions as :meth:`parse`. The first ``ts`` stands for all:
        written ``YYYY-MM-DD hh:mm:ss[.ffffff]`` (space or ``T``) without an offset, DuckDB's
        ``read_csv`` parses that layout itself; otherwise ``ts`` is read in the spellings of
        :mod:`analytics.timelayouts`, and a value with an offset where the first has none (or
        the other way round) is left to the checked reader, which counts both kinds. So every
        time is naive (read as UTC: the assumption is stated) or every one has its offset. A
        file whose counts are all there is stored by one ``INSERT ... SELECT``
        (:meth:`~analytics.ingest.fastcsv.Streamed.direct_sql`); an empty count (a note naming
        lines) or a step back in time goes to the batches. A fractional count, an empty or
        unreadable time, a ``failed`` other than true / false / 1 / 0 go to the checked reader,
        which names the line. None (the checked reader) for another table, a repeated column
        name, or ``--tz`` (local times with their DST hours are resolved on the whole series).
        A file whose later times leave the first one's layout (a whole second after a fraction,
        as Python's ``isoformat`` writes) is read again without it (``layout`` False: the
        ``fallback``), not left to the checked reader, which holds a file whole.
        """
        header = header_fields(head)
        if (_table_for(header) != "requests" or len(set(header)) != len(header)
                or opts.tz is not None):
            return None
        first = header_fields(head, 1)
        value = first[header.index("ts")].strip() if len(first) == len(header) else ""
        zoned = re.search(_OFFSET, value) is not None
        layout = _layout(value) if layout else None
        canon = CANONICAL["requests"]
        have = [c for c in canon if c in header]
        types = {c: "DOUBLE" for c in ("prompt_tokens", "completion_tokens", "latency_s",
                                       "gpu_s")}
        bad = [f'coalesce("{c}" <> trunc("{c}"), false)' for c in ("prompt_tokens",
                                                                    "completion_tokens")]
        if layout is not None:  # read_csv parses it; another spelling stops the read
            types["ts"], select = "TIMESTAMP", ['"ts" AS ts']
            bad.append('"ts" IS NULL')
        else:
            raw = '"ts"'
            select = [f"{duckdb_iso(raw)} AS ts"]
            bad += [f"{raw} IS NULL", f"{duckdb_iso(raw)} IS NULL",
                    f"{duckdb_has_offset(raw)} <> {str(zoned).lower()}"]
        for c in have:
            if c == "ts":
                continue
            if c == "failed":
                low = 'lower(trim("failed"))'
                select.append(f"coalesce({low} IN ('true', '1'), false) AS failed")
                bad.append(f"coalesce({low} NOT IN ('true', 'false', '1', '0'), false)")
            else:
                select.append(f'"{c}"::{COLUMNS["requests"][c]} AS {c}')
        if "failed" not in have:
            select.append("false AS failed")
        select.append("(" + " OR ".join(bad) + ") AS __bad")
        tallies = [(c, NoteTally(f"empty {c}: left empty (NULL, not 0)", c))
                   for c in _MAY_BE_EMPTY["requests"]]
        missing = [c for c in canon if c not in have]

        def rows(batch, state):  # the time order as parse checks it; the empty counts noted
            carry_monotone(batch, state, display, opts.max_backstep_s, "ts")
            for col, tally in tallies:
                tally.add(batch, batch[col].is_null())

        def warnings(state):
            head = [f"canonical requests file; absent optional columns left empty: {missing}"]
            return (*(head if missing else []),
                    *(n for n in (tally.note() for _, tally in tallies) if n is not None))

        reading = "read as UTC (give --tz with the zone they were written in)"
        return Plan({c: types.get(c, "VARCHAR") for c in header}, ", ".join(select), rows,
                    warnings, 1e-6, table="requests", sources={c: c for c in have},
                    timestampformat=layout,
                    fallback=None if layout is None else
                    (lambda: Canonical.stream_plan(display, head, opts, layout=False)),
                    batch_only="prompt_tokens IS NULL OR completion_tokens IS NULL",
                    assumptions=() if zoned else (
                        f"time zone assumed: the file's ts times have no offset and were "
                        f"{reading}",))

    @staticmethod
    def detect(name: str, head: str) -> bool:
        return head == "PAR1" or _table_for(header_fields(head)) is not None

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        if is_parquet(path):
            try:
                frame = pl.read_parquet(path).with_row_index(ROW)
            except Exception as exc:  # noqa: BLE001
                raise FormatError(display, 1, 1, f"unreadable Parquet: {exc}") from exc
            table = _table_for(frame.columns)
            if table is None:
                raise FormatError(display, 1, 1, f"no canonical column set in {frame.columns}")
            header_line = 0  # Parquet has no text lines: 'line' is the 1-based row number
        else:
            table = _table_for(header_fields(read_head(path, display)))
            if table is None:
                raise FormatError(display, 1, 1, "header has no canonical column set")
            spec = {c: (pl.String if c == "ts" else CANONICAL[table][c]) for c in REQUIRED[table]
                    if c != SITE_VALUE.get(table)  # a site series' value may be blank
                    and c not in _MAY_BE_EMPTY.get(table, ())}
            opt = {c: (pl.String if t == pl.Boolean else t) for c, t in CANONICAL[table].items()
                   if c not in spec}
            frame = read_csv_checked(path, display, spec, optional=opt)
            if "failed" in frame.columns:
                low = frame["failed"].str.to_lowercase()
                ok = low.is_in(["true", "false", "1", "0"]) | low.is_null()
                if not ok.all():
                    idx = int((~ok).arg_true()[0])
                    raise FormatError(display, 2 + int(frame[ROW][idx]), "failed",
                                      f"{frame['failed'][idx]!r} is not true/false/1/0")
                frame = frame.with_columns(low.is_in(["true", "1"]).alias("failed"))
            header_line = 1
        notes = [note_rows(frame, frame[c].is_null(), f"empty {c}: left empty (NULL, not 0)",
                           c, header_line) for c in _MAY_BE_EMPTY.get(table, ())]
        for c in REQUIRED[table]:
            if c in _MAY_BE_EMPTY.get(table, ()):
                continue
            nulls = frame[c].is_null() if c != SITE_VALUE.get(table) else pl.Series([False])
            if nulls.any():
                raise FormatError(display, header_line + 1 + int(frame[ROW][int(nulls.arg_true()[0])]),
                                  c, "empty value")
        zone_note = _zone_assumption(frame, opts.tz, header_line)
        frame = _ts_text(frame, display, table, opts.tz, notes, header_line)
        numeric = [c for c in ("prompt_tokens", "completion_tokens", "tokens", "requests", "bin_s",
                               "gco2_per_kwh", "latency_s") if c in frame.columns]
        check_nonnegative(frame, numeric, display, header_line=header_line)
        if "bin_s" in frame.columns:  # a zero-width bin has no rate and divides by zero later
            check_range(frame, "bin_s", display, low=0, low_open=True, header_line=header_line)
        if table == "requests":
            check_monotone(frame, display, opts.max_backstep_s, "ts", header_line=header_line)
        frame = frame.with_columns((pl.col(ROW) + header_line + 1).alias("__line"))
        frame, rule_notes = check_rules(frame, table, display)  # before conform casts counts
        notes.extend(rule_notes)
        out = conform(frame, table, defaults={"failed": False, "basis": "avg"})
        resolution = float(out["bin_s"].min()) if table == "demand_series" else (
            1e-6 if table == "requests" else 3600.0)
        missing = [c for c in CANONICAL[table] if c not in frame.columns]
        warnings = [f"canonical {table} file; absent optional columns left empty: {missing}"] \
            if missing else []
        if opts.tz is None:
            by, unique = _SEQUENCES.get(table, ([], False))
            warnings.extend(note_clock_steps(frame, "ts", by=[c for c in by if c in frame.columns],
                                             unique=unique, header_line=header_line)
                            if unique else [])
        if table in SITE_VALUE:
            warnings.extend(_site_notes(frame, table, header_line))
        return Parsed(table, Canonical.NAME, out, display, resolution,
                      tuple(w for w in [*warnings, *notes] if w is not None),
                      sources={c: c for c in out.columns if c in frame.columns},
                      assumptions=(zone_note,) if zone_note else (),
                      lines=frame["__line"])
