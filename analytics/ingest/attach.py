"""Attach request logs where they live (``headroom attach NAME PATTERN``): the files are listed,
described and checked by SQL in the store (:mod:`analytics.store.attached`), and only where SQL
found a bad value in a CSV file whose line it cannot name is that one file read in Python, by
the checked canonical reader, to name line and column with its usual message.

Attaching reads server paths, so it is operator configuration: the CLI attaches; the Data
page lists attached datasets and refreshes them, and has no field for a path.
"""

from __future__ import annotations

from analytics.config import ParseOptions, check_dataset_name
from analytics.ingest.rawfile import FormatError
from analytics.schema import COLUMNS
from analytics.store import attached


def _head(path: str) -> bytes:
    if attached.is_remote(path):
        return b""
    try:
        with open(path, "rb") as fh:
            return fh.read(4)
    except OSError:
        return b""


def _named(v: attached.Violation, form: str) -> FormatError:
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
    files = attached.list_files(con, pattern)
    paths = [f[0] for f in files]
    form = attached.form_of(pattern, _head(paths[0]))
    columns = attached.describe(con, form, paths)
    attached.check_columns(columns, paths[0])
    checked = attached.check(con, form, paths, columns)
    if checked.violation is not None:
        raise _named(checked.violation, form)
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
                             tuple(warnings), sources, assumptions, refresh=refresh)

