"""Attached request files (:mod:`analytics.store.attached`): listing a pattern's files, their
form and columns, and the SQL that reads them in the canonical ``requests`` columns (a
Parquet file by name across files, a CSV with the one header every file has; hive partition
keys as columns; text times in the spellings of :mod:`analytics.timelayouts`)."""

from __future__ import annotations

import os

from analytics.schema import COLUMNS
from analytics.store.core import StoreError
from analytics.store.csvread import literal, quoted
from analytics.timelayouts import duckdb_iso

#: Most files one attached dataset may list (a pattern that matches a whole disk is refused).
MAX_FILES = 100_000
#: Longest pattern (characters).
MAX_PATTERN = 2_000
_REMOTE = ("s3://", "s3a://", "gs://", "gcs://", "r2://", "http://", "https://", "hf://")
_TS_TYPES = ("TIMESTAMP", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S", "TIMESTAMP WITH TIME ZONE",
             "VARCHAR")
#: the columns a request file must have (as the canonical format requires them)
REQUIRED = ("ts", "prompt_tokens", "completion_tokens")


class AttachRefused(StoreError):
    """The pattern or its files cannot be attached (no file, too many, mixed forms, a column
    missing or of the wrong type); ``message`` says which, naming the file."""


class AttachedChanged(StoreError):
    """An attached dataset's files changed since they were validated: refresh it."""


def is_remote(pattern: str) -> bool:
    """Whether ``pattern`` names object storage or a URL (read through DuckDB's httpfs)."""
    return pattern.lower().startswith(_REMOTE)


def listed(files: list[str]) -> str:
    """``files`` as a DuckDB list literal (the table functions' first argument)."""
    return "[" + ", ".join(literal(f) for f in files) + "]"


def _remote_ready(cur, pattern: str) -> None:
    if not is_remote(pattern):
        return
    try:
        cur.execute("LOAD httpfs")
    except Exception as exc:  # noqa: BLE001 - DuckDB's error names the missing extension
        raise AttachRefused(
            f"{pattern}: object storage needs DuckDB's httpfs extension, which is not "
            f"installed here ({exc}); install it once with python -c \"import duckdb; "
            "duckdb.sql('INSTALL httpfs')\"") from exc


def list_files(con, pattern: str) -> list[tuple[str, int, str]]:
    """The files ``pattern`` (a glob; ``**`` for any depth) matches, in name order, as
    ``(path, bytes, modified)``: a local file's ``st_mtime_ns``, a remote one's listed time.

    Raises
    ------
    AttachRefused
        Pattern too long, no file, more than :data:`MAX_FILES`.
    """
    if not pattern or len(pattern) > MAX_PATTERN:
        raise AttachRefused(f"a pattern of 1-{MAX_PATTERN:,} characters is needed")
    with con.cursor() as cur:
        _remote_ready(cur, pattern)
        try:
            rows = cur.execute("SELECT filename, size, last_modified::VARCHAR FROM read_blob(?) "
                               "ORDER BY filename LIMIT ?", [pattern, MAX_FILES + 1]).fetchall()
        except Exception as exc:  # noqa: BLE001 - DuckDB: no file matches
            raise AttachRefused(f"{pattern}: no file matches ({_short(exc)})") from exc
    if not rows:
        raise AttachRefused(f"{pattern}: no file matches")
    if len(rows) > MAX_FILES:
        raise AttachRefused(f"{pattern}: more than {MAX_FILES:,} files match; narrow the pattern")
    if is_remote(pattern):
        return [(str(p), int(s), str(m)) for p, s, m in rows]
    out = []
    for p, _, _ in rows:  # a local file's own stat: what :func:`changed_files` compares
        try:
            st = os.stat(p)
        except OSError as exc:
            raise AttachRefused(f"{p}: gone while it was listed ({exc.strerror})") from exc
        out.append((str(p), int(st.st_size), int(st.st_mtime_ns)))
    return out


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:300]


def form_of(pattern: str, first_file_head: bytes) -> str:
    """``parquet`` or ``csv``: from the pattern's suffix, else the first file's magic bytes."""
    low = pattern.lower()
    if low.endswith(".parquet"):
        return "parquet"
    if low.endswith((".csv", ".csv.gz")):
        return "csv"
    return "parquet" if first_file_head[:4] == b"PAR1" else "csv"


def _reader(form: str, files: list[str], csv_header: list[str] | None = None,
            extra: str = "") -> str:
    """The DuckDB table function over ``files``: Parquet by name across files; CSV with the one
    header every file has (``csv_header``, checked by the caller), its fields typed without
    detection (counts as DOUBLE, ``ts`` and ``failed`` as text: the checks judge them; other
    fields text), strict rows (a row with more or fewer fields stops the read, naming its line)."""
    names = listed(files)
    if form == "parquet":
        return (f"read_parquet({names}, hive_partitioning = true, union_by_name = true"
                f"{extra})")
    spec = ", ".join(f"{literal(c)}: {literal(csv_type(c))}" for c in csv_header or [])
    return (f"read_csv({names}, header = true, hive_partitioning = true, auto_detect = false, "
            f"delim = ',', quote = '\"', escape = '\"', strict_mode = true, "
            f"null_padding = false, columns = {{{spec}}}{extra})")


def csv_type(field: str) -> str:
    """How a CSV field is read: a canonical count or duration as DOUBLE, anything else text."""
    return "DOUBLE" if field in _CSV_NUMBERS else "VARCHAR"


_CSV_NUMBERS = ("prompt_tokens", "completion_tokens", "latency_s", "gpu_s")


def hive_keys(path: str) -> list[str]:
    """The partition keys of a file's folders (``date=2026-12-01`` -> ``date``), outermost first."""
    parts = path.replace("\\", "/").split("/")[:-1]
    return [p.split("=", 1)[0] for p in parts if "=" in p and p.split("=", 1)[0]]


def describe(con, form: str, files: list[str], csv_header: list[str] | None = None) -> dict:
    """Column -> DuckDB type of the attached files (hive partition keys included).

    Raises
    ------
    AttachRefused
        DuckDB cannot read the files (its first line of error, naming the file); a partition
        key that is also a column of the files (the folder's value would replace the file's);
        Parquet files whose ``ts`` is zoned in some and naive in others.
    """
    keys = hive_keys(files[0])
    with con.cursor() as cur:
        _remote_ready(cur, files[0])
        try:
            got = cur.execute(f"DESCRIBE SELECT * FROM {_reader(form, files, csv_header)}"
                              ).fetchall()
            own = set(csv_header or []) if form == "csv" else _parquet_fields(cur, files)
        except AttachRefused:
            raise
        except Exception as exc:  # noqa: BLE001
            raise AttachRefused(f"{files[0]}: unreadable as {form} ({_short(exc)})") from exc
    clash = [k for k in keys if k in own]
    if clash:
        raise AttachRefused(f"{files[0]}: the folder key {clash[0]}= is also a column of the "
                            f"file: its folder value would replace the file's {clash[0]}; "
                            "rename the folder key")
    return {str(r[0]): str(r[1]) for r in got}


def _parquet_fields(cur, files: list[str]) -> set[str]:
    """The column names the Parquet files hold themselves (not their folders); refuses a ``ts``
    zoned in some files and naive in others (DuckDB would read the naive ones in the session's
    zone)."""
    names = listed(files)
    rows = cur.execute(f"SELECT file_name, name, coalesce(logical_type, converted_type, type) "
                       f"FROM parquet_schema({names}) WHERE num_children IS NULL").fetchall()
    zoned = {}
    for file, name, kind in rows:
        if name == "ts" and kind is not None:
            zoned.setdefault("isAdjustedToUTC=1" in str(kind), file)
    if len(zoned) > 1:
        raise AttachRefused(f"{zoned[True]}: ts carries a time zone (UTC-adjusted) while "
                            f"{zoned[False]} has none: write every file's ts the same way")
    return {str(r[1]) for r in rows}


def check_columns(columns: dict[str, str], first: str) -> None:
    """Refuse files without the required request columns or with a ``ts`` that is no time.

    Raises
    ------
    AttachRefused
        Naming the first file, the column and what was found.
    """
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        comma = " in a comma-separated header" if first.lower().endswith((".csv", ".gz")) else ""
        raise AttachRefused(f"{first}: no column {', '.join(missing)}{comma} (an attached "
                            f"request dataset needs {', '.join(REQUIRED)}; found "
                            f"{', '.join(columns)})")
    if columns["ts"] not in _TS_TYPES:
        raise AttachRefused(f"{first}: column ts has type {columns['ts']}, expected timestamps")
    for col in ("prompt_tokens", "completion_tokens", "latency_s", "gpu_s"):
        kind = columns.get(col)
        if kind is not None and not _numeric(kind):
            raise AttachRefused(f"{first}: column {col} has type {kind}, expected numbers")


def _numeric(kind: str) -> bool:
    return kind in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                    "USMALLINT", "UINTEGER", "UBIGINT", "FLOAT", "DOUBLE") or \
        kind.startswith("DECIMAL")


def _ts_sql(kind: str, col: str = "ts") -> str:
    """``col`` (of DuckDB type ``kind``) as naive UTC: a zoned time converted, text with an
    offset converted by it and without one read as UTC, whatever the session's zone."""
    q = quoted(col)
    if kind == "TIMESTAMP WITH TIME ZONE":
        return f"timezone('UTC', {q})"
    if kind == "VARCHAR":  # the ISO 8601 spellings every road reads (analytics.timelayouts)
        return duckdb_iso(q)
    return f"CAST({q} AS TIMESTAMP)"


def canonical_select(columns: dict[str, str]) -> str:
    """Select list of the canonical ``requests`` columns over files with ``columns``: absent
    optional columns empty (``failed`` false), counts as BIGINT (their whole numbers checked on
    attach), ``failed`` text as true / 1."""
    out = []
    for col, kind in COLUMNS["requests"].items():
        have = columns.get(col)
        if have is None:
            out.append(f"{'false' if col == 'failed' else 'NULL'}::{kind} AS {col}")
        elif col == "ts":
            out.append(f"{_ts_sql(have)} AS ts")
        elif col == "failed" and have != "BOOLEAN":
            out.append("coalesce(lower(trim(failed::VARCHAR)) IN ('true', '1'), false) AS failed")
        else:
            out.append(f"CAST({quoted(col)} AS {kind}) AS {col}")
    return ", ".join(out)


def relation(form: str, files: list[str], columns: dict[str, str], dataset_id: int,
             csv_header: list[str] | None = None) -> str:
    """The attached dataset as a subquery in the ``requests`` view's columns (``dataset_id``
    first), for the reads of :mod:`analytics.store.reads` and :mod:`~analytics.store.summaries`."""
    return (f"(SELECT {int(dataset_id)} AS dataset_id, {canonical_select(columns)} "
            f"FROM {_reader(form, files, csv_header)})")
