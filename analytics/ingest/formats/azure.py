"""Azure LLM inference traces (2023 Splitwise; 2024 DynamoLLM week-long traces).

Source: Azure/AzurePublicDataset, ``AzureLLMInferenceTrace_{code,conv}[_1week].csv``, CC BY 4.0.
Columns ``TIMESTAMP, ContextTokens, GeneratedTokens``. ``TIMESTAMP`` is UTC: the 2023 release
writes ``YYYY-MM-DD HH:MM:SS.fffffff`` (7 fractional digits, read to the microsecond, no offset);
the 2024 week-long release writes ``+00:00`` and six fraction digits or none
(``2024-05-10 00:00:00.123456+00:00``, ``2024-05-10 00:00:01+00:00``). Any ISO 8601 form with or
without an offset is accepted (:func:`~analytics.ingest.csvcheck.parse_timestamps`); values with
an offset are converted to UTC with it, values without one are read as UTC (``--tz`` does not
apply: the traces are not in a local clock).
The traces carry no model name, failure flag, session or latency: those columns stay empty. An
empty ``GeneratedTokens`` cell (an edited export) is left empty (NULL, not 0) with a note naming
the line.
"""

from __future__ import annotations

import re

import polars as pl

from analytics.ingest.fastcsv import Plan, carry_monotone
from analytics.ingest.formats._common import (
    ROW,
    FormatError,
    NoteTally,
    Parsed,
    check_monotone,
    check_nonnegative,
    header_fields,
    note_rows,
    offset_assumption,
    parse_timestamps,
    read_csv_checked,
)
from analytics.timelayouts import DUCKDB_AZURE, VALID_OFFSET


class AzureLLM:
    """Azure LLM inference trace 2023 / 2024 -> ``requests``."""

    NAME = "azure_llm"
    SOURCE_COLUMNS = {"ts": "TIMESTAMP", "prompt_tokens": "ContextTokens",
                      "completion_tokens": "GeneratedTokens"}
    TABLE = "requests"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        fields = header_fields(head)
        return bool(fields) and fields[0] == "TIMESTAMP" and (
            "ContextTokens" in fields or "GeneratedTokens" in fields)

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(
            path, display,
            {"TIMESTAMP": pl.String, "ContextTokens": pl.Int64},
            optional={"GeneratedTokens": pl.Int64},
        )
        if "GeneratedTokens" not in frame.columns:
            raise FormatError(display, 1, "GeneratedTokens", "missing column 'GeneratedTokens'")
        check_nonnegative(frame, ["ContextTokens", "GeneratedTokens"], display)
        zone = offset_assumption(frame["TIMESTAMP"], "TIMESTAMP", _UTC_READING, rows=frame[ROW])
        frame = parse_timestamps(frame, "TIMESTAMP", display, "%Y-%m-%d %H:%M:%S%.f")
        back = check_monotone(frame, display, opts.max_backstep_s, "TIMESTAMP")
        empty = note_rows(frame, frame["GeneratedTokens"].is_null(), _EMPTY, "GeneratedTokens")
        return Parsed("requests", AzureLLM.NAME, _rows(frame), display, 1e-6,
                      _warnings(empty, back), assumptions=(zone,) if zone else ())

    @staticmethod
    def stream_plan(display, head, opts) -> Plan | None:
        """The streamed reading of a large Azure trace (:mod:`analytics.ingest.fastcsv`): the
        same checks and warnings as :meth:`parse`, batch by batch. DuckDB reads ``TIMESTAMP``
        with ``strptime`` in the release's own layouts (fraction of 1-9 digits or none; with
        ``%z`` when the first value carries an offset, as the 2024 release does); any other
        spelling is left to the checked reader. A file without an empty ``GeneratedTokens``
        (``batch_only``) or a step back in time is stored by one ``INSERT ... SELECT``
        (:meth:`~analytics.ingest.fastcsv.Streamed.direct_sql`); the batches take the others.
        None (the checked reader) for a header without the three columns or with a repeated
        name."""
        header = header_fields(head)
        if len(set(header)) != len(header) or not set(_COLUMNS) <= set(header):
            return None
        first = header_fields(head, 1)
        value = first[header.index("TIMESTAMP")] if len(first) == len(header) else ""
        zone = "%z" if re.search(_ISO_OFFSET, value.strip()) else ""
        layouts = ", ".join(f"'{layout}{zone}'" for layout in DUCKDB_AZURE)
        ts = f'try_strptime("TIMESTAMP", [{layouts}])'
        if zone:  # to UTC whatever the session's TimeZone (the direct read runs in the store's);
            # an offset no clock has (+99: DuckDB's %z takes it) is no time, as polars says
            ts = (f"CASE WHEN regexp_matches(trim(\"TIMESTAMP\"), '{VALID_OFFSET}') THEN "
                  f"timezone('UTC', {ts}) END")
        types = {"ContextTokens": "DOUBLE", "GeneratedTokens": "DOUBLE"}
        layout = None
        if not zone and re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{1,9}", value):
            # the 2023 release (a fraction on every value): read_csv parses the layout itself,
            # 0.1 s of CPU a 2 M-row file faster than strptime of a VARCHAR; a value without a
            # fraction stops the read and the checked reader takes the file (issue 15)
            types["TIMESTAMP"], ts, layout = "TIMESTAMP", '"TIMESTAMP"', DUCKDB_AZURE[0]
        # __bad: what the cast to BIGINT would lose or the checked reader refuses: an empty time
        # or prompt count, a fractional count. A non-finite count fails the cast itself, and a
        # negative one the stored rows' rules (direct reads) or each batch's: both stop the
        # read, and the checked reader names the line (issue 15: fewer tests per row)
        select = (f'{ts} AS ts, '  # model, session, latency: the table's default (NULL)
                  '"ContextTokens"::BIGINT AS prompt_tokens, '
                  '"GeneratedTokens"::BIGINT AS completion_tokens, false AS failed, '
                  f'(ts IS NULL OR "ContextTokens" IS NULL '
                  'OR "ContextTokens" <> trunc("ContextTokens") '
                  'OR coalesce("GeneratedTokens" <> trunc("GeneratedTokens"), false)) AS __bad')
        empty = NoteTally(_EMPTY, "GeneratedTokens")

        def rows(batch, state):  # negative counts: the batch's validity rules
            carry_monotone(batch, state, display, opts.max_backstep_s, "TIMESTAMP")
            empty.add(batch, batch["completion_tokens"].is_null())

        def warnings(state):
            return _warnings(empty.note(), state.get("back", 0))

        return Plan({c: types.get(c, "VARCHAR") for c in header}, select, rows, warnings, 1e-6,
                    timestampformat=layout, batch_only="completion_tokens IS NULL",
                    # the first value stands for all: one of the other kind fails strptime,
                    # and the checked reader judges the file and states its own assumption
                    assumptions=() if zone else (
                        offset_assumption(pl.Series([value]), "TIMESTAMP", _UTC_READING),))


_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_UTC_READING = "read as UTC (the Azure traces are written in UTC; --tz does not apply)"
_EMPTY = "empty GeneratedTokens: completion tokens left empty (NULL, not 0)"
# the offsets DuckDB's strptime %z reads on the streamed path (+hh:mm, +hhmm); an hour-only
# one (PostgreSQL's -05) leaves the file to the checked reader (analytics.ingest.rowcheck)
_ISO_OFFSET = r"[+-]\d{2}:?\d{2}$"


def _rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The ``requests`` rows of a checked Azure frame (with ``ts``)."""
    return frame.select(
        "ts",
        pl.lit(None, pl.String).alias("model"),
        pl.col("ContextTokens").alias("prompt_tokens"),
        pl.col("GeneratedTokens").alias("completion_tokens"),
        pl.lit(False).alias("failed"),
        pl.lit(None, pl.String).alias("session_id"),
        pl.lit(None, pl.Float64).alias("latency_s"),
    )


def _warnings(empty, back: int) -> tuple:
    """The warnings of an Azure trace, in the order the report shows them."""
    warnings = ["Azure traces have no model, failure, session or latency fields"]
    if empty is not None:
        warnings.append(empty)
    if back:
        warnings.append(f"{back} rows step back in time within the tolerance")
    return tuple(warnings)
