"""Attach request logs where they live (``headroom attach NAME PATTERN``): the files are listed,
described and checked by SQL in the store (:mod:`analytics.store.attached`), and only where SQL
found a bad value in a CSV file whose line it cannot name is that one file read in Python, by
the checked canonical reader, to name line and column with its usual message.

Attaching reads server paths, so it is operator configuration: the CLI attaches; the Data
page lists attached datasets and refreshes them, and has no field for a path.
"""

from __future__ import annotations

import os

from analytics.config import ParseOptions, check_dataset_name
from analytics.ingest.rawfile import FormatError
from analytics.schema import COLUMNS
from analytics.store import attached, attached_check, attached_files


def _head(path: str) -> bytes:
    if attached_files.is_remote(path):
        return b""
    try:
        with open(path, "rb") as fh:
            return fh.read(4)
    except OSError:
        return b""


def _named(v: attached_check.Violation, form: str) -> FormatError:
    """The FormatError of a violation: Parquet names the row (its 'line', as the canonical
    reader names Parquet rows), a CSV cell DuckDB could not read its line; a CSV rule the
    checked reader finds in that file."""
    if v.row is not None:
        return FormatError(v.file, v.row, v.column, v.reason)
    if v.line is not None:
        return FormatError(v.file, v.line, v.column, v.reason)
    from analytics.ingest.formats import parse_file

    try:
        parse_file(v.file, v.file, "canonical", ParseOptions(max_backstep_s=float("inf")))
    except FormatError as exc:
        return exc
    return FormatError(v.file, 1, v.column, f"{v.reason} (in some row of this file)")


def attach(con, name: str, pattern: str | None = None, refresh: bool = False) -> dict:
    """Attach the request files ``pattern`` matches as dataset ``name`` (``refresh``: check an
    attached dataset's files again, its pattern as recorded, and take in new files).

    Returns the report (:func:`analytics.store.attached.register`): files, bytes, rows, span,
    how each column was checked, sources, assumptions (a time without a zone read as UTC),
    warnings (empty token counts, columns not read).

    Raises
    ------
    FormatError
        A value the rules refuse, naming file, line (Parquet: row) and column; nothing written.
    AttachRefused
        No file, too many, unreadable, a required column missing or mistyped.
    ValueError, NameTaken, UnknownDataset
        A bad name; the name held (attach); no attached dataset of that name (refresh).
    """
    check_dataset_name(name)
    if refresh:
        pattern = attached.status(con, name)["pattern"]
    elif not pattern:
        raise ValueError("give the files to attach: a path or glob, e.g. 'logs/date=*/*.parquet'")
    else:
        pattern = _absolute(pattern)
    try:
        files = attached_files.list_files(con, pattern)
    except attached_files.AttachRefused as exc:
        if refresh:  # every file gone: a refresh cannot help
            raise attached_files.AttachRefused(f"{exc} (if its files are gone for good, remove the "
                                         f"dataset: headroom delete {name})") from exc
        raise
    paths = [f[0] for f in files]
    form = attached_files.form_of(pattern, _head(paths[0]))
    header = _csv_header(paths) if form == "csv" else None
    columns = attached_files.describe(con, form, paths, header)
    attached_files.check_columns(columns, paths[0])
    checked = attached_check.check(con, form, paths, columns, header)
    if checked.violation is not None:
        raise _named(checked.violation, form)
    if checked.rows == 0:
        raise FormatError(paths[0], 2, 1, f"no data rows in the {len(paths):,} files "
                                          f"{pattern} matches (headers only)")
    canon = COLUMNS["requests"]
    unread = [c for c in columns if c not in canon]
    warnings = []
    if checked.empty_tokens:
        warnings.append(f"{checked.empty_tokens:,} requests with an empty prompt or completion "
                        "count: left empty (NULL, not 0)")
    if unread:
        warnings.append(f"columns not read: {', '.join(unread)}")
    missing = [c for c in canon if c not in columns]
    if missing:
        warnings.append(f"absent optional columns left empty: {', '.join(missing)}")
    assumptions = ()
    if checked.naive_ts:
        assumptions = ("the files' ts without a zone or offset read as UTC",)
    sources = {c: c for c in canon if c in columns}
    return attached.register(con, name, pattern, form, files, columns, checked,
                             tuple(warnings), sources, assumptions, refresh=refresh,
                             csv_header=header)


def _absolute(pattern: str) -> str:
    """A local pattern as an absolute path (the app and a cron job run elsewhere); a folder is
    refused with the glob of its files to give instead."""
    if attached_files.is_remote(pattern):
        return pattern
    path = os.path.abspath(os.path.expanduser(pattern))
    if os.path.isdir(path):
        raise attached_files.AttachRefused(f"{pattern} is a folder: give a glob of its files, e.g. "
                                     f"'{pattern.rstrip('/')}/**/*.parquet'")
    return path


#: Most bytes of a CSV file's first line read for its header
_HEADER_BYTES = 1 << 20


def _csv_header(paths: list[str]) -> list[str]:
    """The header every CSV file has (read from each file's first line: the one place Python
    opens an attached file before SQL, to name a file whose header differs or whose name hides
    its compression).

    Raises
    ------
    AttachRefused
        A file whose header differs from the first file's, or gzip bytes without ``.gz``.
    """
    import csv
    import gzip
    import io

    first = None
    if attached_files.is_remote(paths[0]):
        raise attached_files.AttachRefused(f"{paths[0]}: CSV files are attached from local folders "
                                     "only (their headers are checked file by file); attach "
                                     "Parquet from object storage")
    for path in paths:
        with open(path, "rb") as raw:
            packed = raw.read(2) == b"\x1f\x8b"
        if packed != path.lower().endswith(".gz"):
            raise attached_files.AttachRefused(
                f"{path}: {'gzip-compressed but not named' if packed else 'named'} .gz"
                f"{'' if packed else ' but not gzip-compressed'}: name it as it is")
        with (gzip.open(path, "rb") if packed else open(path, "rb")) as fh:
            line = fh.readline(_HEADER_BYTES).decode("utf-8-sig", errors="replace")
        fields = [f.strip() for f in next(csv.reader(io.StringIO(line)), [])]
        if first is None:
            first = (path, fields)
        elif fields != first[1]:
            raise attached_files.AttachRefused(
                f"{path}: its header ({', '.join(fields)}) differs from {first[0]}'s "
                f"({', '.join(first[1])}): attached CSV files share one header")
    return first[1] if first is not None else []

