"""The text time spellings headroom reads, stated once for every road that reads them.

A text time is ISO 8601: a date ``YYYY-MM-DD``, then ``T``, ``t`` or a space, then
``hh:mm`` with optional ``:ss`` and a fraction of any number of digits (cut to the
microsecond; the Azure one road's layout read, DuckDB's ``read_csv`` of a 2023-release file,
rounds it instead: under a microsecond apart, and the release writes 100 ns ticks whose last
digit is 0 on every row), then optionally an offset: ``Z`` / ``z``, ``+hh:mm``, ``+hhmm`` or the hour-only
``+hh`` that PostgreSQL's ``COPY ... CSV`` writes for ``timestamptz``. Spaces around the value
are ignored. A value with an offset is converted to UTC with it; one without is UTC (or local
time in ``--tz`` where a format takes it). A date alone, another order of the fields
(``16/11/2023``) or a zone name (``UTC``) is no time.

The checked reader applies it with polars (:func:`analytics.ingest.rowcheck.parse_timestamps`
after a format's own layout, :data:`POLARS_WITH_OFFSET` / :data:`POLARS_WITHOUT`), the store's
attached datasets in DuckDB SQL (:func:`duckdb_iso`), and the streamed Azure plan reads its
release's own layouts (:data:`DUCKDB_AZURE`) and leaves every other spelling to the checked
reader. ``tests/ingest/test_time_spellings.py`` holds every road to the same answers.
"""

from __future__ import annotations

#: the date and its separator from the time (normalised to one space)
ISO_DATE_T = r"^(\d{4}-\d{2}-\d{2})[Tt ]"
#: an offset after a time: ``+hh:mm``, ``+hhmm``, ``+hh``; a time before it, so that a date
#: alone (``2024-05-10``) never reads as an offset
ISO_OFFSET = r":\d{2}(?:\.\d*)?[+-]\d{2}(?::?\d{2})?$"
#: ``Z`` / ``z`` at the end: UTC (normalised to ``+00:00``)
ISO_ZULU = r"[Zz]$"
#: polars layouts of a normalised value with and without an offset (``%#z`` takes ``+hh``)
POLARS_WITH_OFFSET = ("%Y-%m-%d %H:%M:%S%.f%#z", "%Y-%m-%d %H:%M%#z")
POLARS_WITHOUT = ("%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%d %H:%M")
#: DuckDB ``strptime`` layouts of a normalised value (``%n``: up to 9 fraction digits)
DUCKDB_WITH_OFFSET = ("%Y-%m-%d %H:%M:%S.%n%z", "%Y-%m-%d %H:%M:%S%z", "%Y-%m-%d %H:%M%z")
DUCKDB_WITHOUT = ("%Y-%m-%d %H:%M:%S.%n", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M")
#: the Azure LLM releases' own layouts (2023: a 7-digit fraction; 2024: ``+00:00``), in
#: DuckDB's dialect: ``%z`` is appended when the first value has an offset
DUCKDB_AZURE = ("%Y-%m-%d %H:%M:%S.%n", "%Y-%m-%d %H:%M:%S")


def _sql_list(layouts: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{f}'" for f in layouts) + "]"


def duckdb_normalised(col_sql: str) -> str:
    """SQL: the text ``col_sql`` trimmed, its date separator a space, a fraction cut to six
    digits (DuckDB's casts round a nanosecond time; polars and Python cut it), ``Z`` as
    ``+00:00`` and an hour-only offset as ``+hh:00``."""
    spaced = f"regexp_replace(trim({col_sql}), '{ISO_DATE_T}', '\\1 ')"
    cut = f"regexp_replace({spaced}, '(\\.\\d{{6}})\\d+', '\\1')"  # cut, not rounded
    zulu = f"regexp_replace({cut}, '{ISO_ZULU}', '+00:00')"
    return f"regexp_replace({zulu}, '(:\\d{{2}}(\\.\\d*)?[+-]\\d{{2}})$', '\\1:00')"


def duckdb_has_offset(col_sql: str) -> str:
    """SQL: whether the text ``col_sql`` carries an offset (or ``Z``)."""
    return f"regexp_matches({duckdb_normalised(col_sql)}, '{ISO_OFFSET}')"


#: an offset a clock can have (hours 00-23, minutes 00-59): DuckDB's ``%z`` takes any two
#: digits (``+99`` shifted a time by four days) where polars refuses them
VALID_OFFSET = r"[+-]([01]\d|2[0-3]):?[0-5]\d$"


def duckdb_iso(col_sql: str) -> str:
    """SQL: the text ``col_sql`` as a naive UTC ``TIMESTAMP`` by the spellings above, NULL where
    it is none (an offset outside +-23:59 included; whatever the session's time zone)."""
    norm = duckdb_normalised(col_sql)
    return (f"CASE WHEN regexp_matches({norm}, '{ISO_OFFSET}') THEN CASE WHEN "
            f"regexp_matches({norm}, '{VALID_OFFSET}') THEN timezone('UTC', "
            f"try_strptime({norm}, {_sql_list(DUCKDB_WITH_OFFSET)})) END "
            f"ELSE try_strptime({norm}, {_sql_list(DUCKDB_WITHOUT)})::TIMESTAMP END")
