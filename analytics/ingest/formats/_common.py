"""Shared pieces of the format parsers: the plug-in form, file stems, and re-exports.

The parsed-file record :class:`Parsed` lives in :mod:`analytics.schema` (the store reads it too).
The validator itself (:class:`FormatError`, checked CSV reading, the row checks that name line and
column) lives in :mod:`analytics.ingest.csvcheck` and is re-exported here for the format modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Protocol

from analytics.ingest.csvcheck import (  # re-exported: the format modules import from here
    ROW,
    FormatError,
    NoteTally,
    SkippedByDesign,
    check_allowed,
    check_gzip_stream,
    check_header_unique,
    check_monotone,
    check_nonnegative,
    check_range,
    check_rules,
    check_unique,
    header_fields,
    is_gzip,
    is_parquet,
    locate_structure_error,
    note_rows,
    open_text,
    parse_timestamps,
    raise_at_first,
    read_csv_checked,
    read_head,
    wide_csv_fields,
)
from analytics.schema import Note, Parsed  # re-exported: formats and the CLI import them here

__all__ = [
    "ROW", "Format", "FormatError", "Parsed", "SkippedByDesign", "check_allowed",
    "check_gzip_stream", "check_header_unique", "check_monotone", "check_nonnegative",
    "check_range", "check_rules", "check_unique", "file_stem", "site_assumption",
    "t0_assumption",
    "offset_assumption",
    "weekdays_note",
    "zone_assumption",
    "header_fields", "is_gzip", "is_parquet", "locate_structure_error", "Note", "NoteTally",
    "note_rows",
    "open_text",
    "parse_timestamps", "raise_at_first", "read_csv_checked", "read_head", "wide_csv_fields",
]


class Format(Protocol):
    """The plug-in form every input format takes (a class; its methods are static).

    Attributes
    ----------
    NAME : str   format name (``--format``, the ledger's ``format`` column)
    TABLE : str  canonical table it fills (``"any"`` for the canonical-schema reader)
    """

    NAME: ClassVar[str]
    TABLE: ClassVar[str]

    @staticmethod
    def detect(name: str, head: str) -> bool:
        """Whether the file called ``name`` whose first 64 KiB of text are ``head`` is this
        format (``head`` is ``"PAR1"`` for Parquet). Never raises."""

    @staticmethod
    def parse(path: Path, display: str, opts) -> Parsed:
        """Parse the file at ``path`` (messages name it ``display``) with ``ParseOptions``
        ``opts``. Raises FormatError(file, line, column, reason) for invalid input."""


def t0_assumption(opts, what: str = "the file's times count from the trace start") -> str:
    """The stated assumption of a format whose times are relative: where they were placed."""
    stamp = opts.t0.isoformat().replace("+00:00", "Z")
    if getattr(opts, "t0_given", False):
        return f"start time given: {what}, placed at t0 = {stamp} (as given at ingest)"
    return f"start time assumed: {what}, placed at t0 = {stamp} (give --t0 to set it)"


def weekdays_note(opts) -> str:
    """What the weekdays of a relative trace mean: relative to the assumed t0, or those of the
    t0 the user gave."""
    if getattr(opts, "t0_given", False):
        return "weekdays are those of the t0 given at ingest"
    return "weekdays are relative to t0 (the start time assumed)"


def zone_assumption(tz: str | None, who: str) -> str:
    """The stated assumption about times written without an offset (``LOCAL_TIMES`` formats):
    read in ``tz`` and converted, or read as UTC. ``who`` writes them (``sacct``)."""
    if tz:
        return f"time zone: {who} times have no offset; read as local time in {tz}, converted to UTC"
    return (f"time zone assumed: {who} times have no offset and were read as UTC "
            "(give --tz with the zone they were written in)")


_OFFSET = r"([Zz]|[+-]\d{2}(:?\d{2})?)$"


def offset_assumption(col, who: str, reading: str, header_line: int = 1,
                      rows=None) -> str | None:
    """The stated assumption about the time cells of ``col`` (a polars String column, in file
    order, one per data row) written without an offset: None when each carries one (``Z``,
    ``+hh:mm``, ``+hhmm``, ``+hh``); else how many do not, from which line, and ``reading``
    (how they were read: ``"read as UTC"``). ``who`` names the column in the sentence;
    ``rows`` (0-based data rows, e.g. ``__row``) places the lines, else the cells' order."""
    import polars as pl

    text = col.cast(pl.String).str.strip_chars()
    naive = text.is_not_null() & (text != "") & ~text.str.contains(_OFFSET)
    k = int(naive.sum())
    if k == 0:
        return None
    n = int((text.is_not_null() & (text != "")).sum())
    if k == n:
        return f"time zone assumed: {who} times have no offset and were {reading}"
    at = int(naive.arg_true()[0])
    first = (at if rows is None else int(rows[at])) + header_line + 1
    return (f"time zone assumed: {k:,} of {n:,} {who} times have no offset (the first at line "
            f"{first}) and were {reading}; the other {n - k:,} were converted to UTC with their "
            "own offset")


def site_assumption(opts, site: str, where: str) -> tuple[str, ...]:
    """The stated assumption of a site series that does not name its site (none when
    ``--site`` named it): ``where`` the name was taken from."""
    if opts.site:
        return ()
    return (f"site assumed: {site!r}, from {where} (give --site to name it)",)


def file_stem(display: str) -> str:
    """File name without directories and compression / data suffixes.

    >>> file_stem("dir/AzureLLMInferenceTrace_conv.csv"), file_stem("GB_2023_hourly.csv.gz")
    ('AzureLLMInferenceTrace_conv', 'GB_2023_hourly')
    """
    name = Path(display).name
    for suffix in (".gz", ".csv", ".jsonl", ".json", ".parquet", ".epw", ".prom", ".txt"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    for suffix in (".csv", ".jsonl", ".json", ".epw"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name
