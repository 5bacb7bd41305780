"""Request datasets left where they live: a view over partitioned Parquet or CSV files.

``headroom attach NAME 'logs/date=*/*.parquet'`` registers a ``requests`` dataset whose rows are
never copied into the store: every read of it (grid, field probes, summary, export) scans the
files through DuckDB's ``read_parquet`` / ``read_csv`` with ``hive_partitioning`` (a
``date=2026-12-01`` folder is a column; a ``model=...`` folder fills ``model``). The files
must hold the canonical request columns (``ts``, ``prompt_tokens``, ``completion_tokens``;
optional ``model``, ``failed``, ``session_id``, ``latency_s``, ``gpu_s``, as
:mod:`analytics.ingest.formats.canonical` reads them); other columns are not read and the
report names them.

**Validated once, checked again when the files change.** On attach the files are listed
(DuckDB ``read_blob``: name, size, modification time; the list is the dataset's, a later file
under the pattern is not read until a refresh), their columns described, and the rules of
:data:`analytics.schema.RULES` checked: for Parquet, bounds, empty times and the time range
from the row groups' statistics (``parquet_metadata``; no row is read) and one scan of just
the columns the statistics cannot decide (a floating count's whole numbers, finiteness, a text
time or flag); a CSV has no statistics and is checked by one scan (counts read as DOUBLE, so a
``2.5`` is refused, not rounded; a cell DuckDB cannot read is kept in its rejects table, which
names file, line and column). Every read first compares the recorded files' sizes and
modification times with the files (a ``stat`` each): a file changed or gone since it was
validated stops the read with :class:`AttachedChanged`; a refresh (``headroom attach
--refresh NAME``, the Data page's button) checks the files again and moves the data version.

Rows have no file order across partitions, so the time-order check of a single trace file does
not apply; the grid groups by time. Object storage (``s3://``, ``gs://``, ``https://``) works
where DuckDB's ``httpfs`` extension is installed (headroom loads it; credentials by DuckDB
secrets, operator configuration); the change check there compares the listed sizes and times.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from analytics.schema import COLUMNS, RULES, TS_ACCEPTED
from analytics.store.core import StoreError, _run
from analytics.timelayouts import duckdb_has_offset, duckdb_iso

#: Most files one attached dataset may list (a pattern that matches a whole disk is refused).
MAX_FILES = 100_000
#: Longest pattern (characters).
MAX_PATTERN = 2_000
FORMS = ("parquet", "csv")
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


@dataclass(frozen=True)
class Violation:
    """The first value the rules refuse: ``file``, ``row`` (1-based data row; Parquet: row in
    the file; CSV: None, the checked reader names the line), ``column``, ``reason``; or a cell
    DuckDB could not read (CSV: ``line`` given)."""

    file: str
    column: str
    reason: str
    row: int | None = None
    line: int | None = None


@dataclass
class Checked:
    """What the check of an attached file set found."""

    rows: int = 0
    ts_min: object = None
    ts_max: object = None
    violation: Violation | None = None
    checks: list[str] = field(default_factory=list)  # how each column was checked
    naive_ts: bool = False  # some ts without a zone or offset (read as UTC)
    empty_tokens: int = 0


def is_remote(pattern: str) -> bool:
    """Whether ``pattern`` names object storage or a URL (read through DuckDB's httpfs)."""
    return pattern.lower().startswith(_REMOTE)


def _literal(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


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
    listed = "[" + ", ".join(_literal(f) for f in files) + "]"
    if form == "parquet":
        return (f"read_parquet({listed}, hive_partitioning = true, union_by_name = true"
                f"{extra})")
    spec = ", ".join(f"{_literal(c)}: {_literal(csv_type(c))}" for c in csv_header or [])
    return (f"read_csv({listed}, header = true, hive_partitioning = true, auto_detect = false, "
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
    listed = "[" + ", ".join(_literal(f) for f in files) + "]"
    rows = cur.execute(f"SELECT file_name, name, coalesce(logical_type, converted_type, type) "
                       f"FROM parquet_schema({listed}) WHERE num_children IS NULL").fetchall()
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
    q = _quoted(col)
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
            out.append(f"CAST({_quoted(col)} AS {kind}) AS {col}")
    return ", ".join(out)


def relation(form: str, files: list[str], columns: dict[str, str], dataset_id: int,
             csv_header: list[str] | None = None) -> str:
    """The attached dataset as a subquery in the ``requests`` view's columns (``dataset_id``
    first), for the reads of :mod:`analytics.store.reads` and :mod:`~analytics.store.summaries`."""
    return (f"(SELECT {int(dataset_id)} AS dataset_id, {canonical_select(columns)} "
            f"FROM {_reader(form, files, csv_header)})")


# -- the check --------------------------------------------------------------------------------

def _bounds(col: str) -> list[tuple[str, str]]:
    """(SQL condition true on a value the rules refuse, reason) for a numeric column."""
    rule, q = RULES["requests"].get(col), _quoted(col)
    out = []
    if rule is not None and rule.low is not None:
        out.append((f"{q} < {rule.low!r}", f"below {rule.low:g}, the least a {col} can be"))
    if rule is not None and rule.high is not None:
        out.append((f"{q} > {rule.high!r}", f"above {rule.high:g}, the most a {col} can be"))
    if rule is not None and rule.integer:  # a stored count is a BIGINT
        out.append((f"{q}::DOUBLE >= {_COUNT_CEILING!r}",
                    "too large for a count (2^63 or more): a unit or a column slip?"))
    return out


#: the first value a stored count (BIGINT) cannot hold
_COUNT_CEILING = float(2 ** 63)


def _row_conditions(columns: dict[str, str], form: str, scanned: set[str]) -> list[tuple]:
    """(condition over the raw columns, column, reason) checked row by row on ``scanned``."""
    out = []
    for col in scanned:
        kind, q = columns[col], _quoted(col)
        if col == "ts":
            out.append((f"{q} IS NULL", "ts", "empty value"))
            if kind == "VARCHAR":
                out.append((f"{_ts_sql(kind)} IS NULL", "ts",
                            "not a timestamp in ISO 8601 (with an optional offset)"))
            first, end = (f"TIMESTAMP {_literal(f'{t:%Y-%m-%d %H:%M:%S}')}" for t in TS_ACCEPTED)
            out.append((f"{_ts_sql(kind)} < {first} OR {_ts_sql(kind)} >= {end}", "ts",
                        f"outside {TS_ACCEPTED[0]:%Y}-{TS_ACCEPTED[1]:%Y}, the times a trace "
                        "can hold"))
            continue
        if col == "failed" and kind != "BOOLEAN":
            out.append((f"lower(trim({q}::VARCHAR)) NOT IN ('true', 'false', '1', '0')", col,
                        "not true/false/1/0"))
            continue
        if kind in ("FLOAT", "DOUBLE") or kind.startswith("DECIMAL"):
            out.append((f"NOT isfinite({q}::DOUBLE)", col, "not a finite number"))
            rule = RULES["requests"].get(col)
            if rule is not None and rule.integer:
                out.append((f"{q} <> round({q})", col,
                            "not a whole number (a count); refused, not cut"))
        out.extend((cond, col, reason) for cond, reason in _bounds(col))
    return out


def _parquet_stats(cur, files: list[str], columns: dict[str, str]) -> tuple[dict, set[str]]:
    """Per checked column, the files' statistics when every row group has them:
    ``{col: (min, max, nulls)}``, and the columns the statistics cannot decide (scanned)."""
    checked = [c for c in COLUMNS["requests"] if c in columns and c != "model"
               and c != "session_id"]
    listed = "[" + ", ".join(_literal(f) for f in files) + "]"
    rows = cur.execute(
        f"SELECT path_in_schema, count(*), count(stats_min), count(stats_max), "
        f"count(stats_null_count), min(TRY_CAST(stats_min AS DOUBLE)), "
        f"max(TRY_CAST(stats_max AS DOUBLE)), min(stats_min), max(stats_max), "
        f"sum(stats_null_count) FROM parquet_metadata({listed}) GROUP BY 1").fetchall()
    by = {r[0]: r for r in rows}
    # a column some file lacks (union_by_name: NULL there) has fewer row groups than the files
    groups = cur.execute(f"SELECT count(*) FROM (SELECT DISTINCT file_name, row_group_id "
                         f"FROM parquet_metadata({listed}))").fetchone()[0]
    stats, scanned = {}, set()
    for col in checked:
        kind, got = columns[col], by.get(col)
        whole = got is not None and got[1] == got[2] == got[3] == got[4] == groups
        if col == "ts":
            if whole and kind in ("TIMESTAMP", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S"):
                stats[col] = (got[7], got[8], int(got[9]))
            else:  # a zoned or text time: the statistics' spelling is not a naive UTC time
                scanned.add(col)
            continue
        if col == "failed":
            if kind != "BOOLEAN":
                scanned.add(col)
            continue
        floating = kind in ("FLOAT", "DOUBLE") or kind.startswith("DECIMAL")
        if whole and got[5] is not None and not floating:
            stats[col] = (got[5], got[6], int(got[9]))
        else:  # floats: NaN / inf are not in the statistics; whole counts need every value
            scanned.add(col)
    return stats, scanned


def check(con, form: str, files: list[str], columns: dict[str, str],
          csv_header: list[str] | None = None) -> Checked:
    """Check the rules on the attached ``files`` (see the module docstring); the first value
    refused is :attr:`Checked.violation` (nothing raised: the caller names its line).

    Raises
    ------
    AttachRefused
        DuckDB cannot read a file.
    """
    out = Checked()
    with con.cursor() as cur:
        _remote_ready(cur, files[0])
        try:
            if form == "parquet":
                return _check_parquet(cur, files, columns, out)
            return _check_csv(cur, files, columns, out, csv_header)
        except AttachRefused:
            raise
        except Exception as exc:  # noqa: BLE001 - a file DuckDB cannot read
            raise AttachRefused(f"{files[0]}: unreadable as {form} ({_short(exc)})") from exc


def _check_parquet(cur, files, columns, out: Checked) -> Checked:
    stats, scanned = _parquet_stats(cur, files, columns)
    listed = "[" + ", ".join(_literal(f) for f in files) + "]"
    out.rows = int(cur.execute(f"SELECT coalesce(sum(num_rows), 0) FROM "
                               f"parquet_file_metadata({listed})").fetchone()[0])
    for col, (low, high, nulls) in stats.items():
        out.checks.append(f"{col}: from the Parquet statistics")
        if col == "ts":
            refuse = nulls > 0 or str(low) < f"{TS_ACCEPTED[0]:%Y-%m-%d}" or \
                str(high) >= f"{TS_ACCEPTED[1]:%Y-%m-%d}"
            if refuse:
                scanned.add(col)  # find the row
            continue
        rule = RULES["requests"].get(col)
        if rule is not None and ((rule.low is not None and low < rule.low)
                                 or (rule.high is not None and high > rule.high)
                                 or (rule.integer and high >= _COUNT_CEILING)):
            scanned.add(col)
    for col in sorted(scanned):
        if col not in stats:
            out.checks.append(f"{col}: one scan of the column (its statistics do not decide it)")
    conds = _row_conditions(columns, "parquet", scanned)
    if conds:
        where = " OR ".join(f"coalesce({c}, false)" for c, _, _ in conds)
        cases = " ".join(f"WHEN coalesce({c}, false) THEN {i}" for i, (c, _, _) in enumerate(conds))
        hit = cur.execute(
            f"SELECT filename, file_row_number, CASE {cases} END FROM "
            f"{_reader('parquet', files, extra=', filename = true, file_row_number = true')} "
            f"WHERE {where} ORDER BY filename, file_row_number LIMIT 1").fetchone()
        if hit is not None:
            _, col, reason = conds[hit[2]]
            out.violation = Violation(hit[0], col, reason, row=int(hit[1]) + 1)
            return out
    ts_stats = stats.get("ts")
    tokens_nulls = [stats[c][2] for c in ("prompt_tokens", "completion_tokens") if c in stats]
    if ts_stats is not None and len(tokens_nulls) == 2 and not any(tokens_nulls):
        # every answer is in the statistics: no row is read at all
        out.ts_min, out.ts_max = (cur.execute("SELECT ?::TIMESTAMP, ?::TIMESTAMP",
                                              [ts_stats[0], ts_stats[1]]).fetchone())
        out.naive_ts = columns["ts"] != "TIMESTAMP WITH TIME ZONE"
        return out
    _span_and_counts(cur, "parquet", files, columns, out)
    return out


def _check_csv(cur, files, columns, out: Checked, csv_header: list[str]) -> Checked:
    conds = _row_conditions(columns, "csv", {c for c in COLUMNS["requests"] if c in columns
                                             and c not in ("model", "session_id")})
    bad = " OR ".join(f"coalesce({c}, false)" for c, _, _ in conds) or "false"
    cases = " ".join(f"WHEN coalesce({c}, false) THEN {i}" for i, (c, _, _) in enumerate(conds))
    out.checks.append("every column: one scan (a CSV has no statistics)")
    reader = _reader("csv", files, csv_header, ", filename = true, store_rejects = true")
    try:
        got = cur.execute(f"SELECT count(*), arg_min(struct_pack(f := filename, c := CASE "
                          f"{cases or 'WHEN false THEN 0'} END), filename) FILTER (WHERE {bad}) "
                          f"FROM {reader}").fetchall()[0]  # whole: rejects kept at its end
        rejected = cur.execute(
            "SELECT s.file_path, e.line, e.column_name, e.error_message FROM reject_errors e "
            "JOIN reject_scans s USING (scan_id, file_id) ORDER BY s.file_path, e.line "
            "LIMIT 1").fetchone()
    finally:
        for table in ("reject_errors", "reject_scans"):
            cur.execute(f"DROP TABLE IF EXISTS {table}")
    if rejected is not None:
        text = _short(ValueError(rejected[3]))
        cell = re.search(r'Could not convert string "(.*)" to', text)
        reason = f"{cell.group(1)!r} is not a number" if cell else text
        out.violation = Violation(str(rejected[0]), str(rejected[2] or 1), reason,
                                  line=int(rejected[1]))
        return out
    out.rows = int(got[0])
    if got[1] is not None:
        _, col, reason = conds[int(got[1]["c"])]
        out.violation = Violation(str(got[1]["f"]), col, reason)
        return out
    _span_and_counts(cur, "csv", files, columns, out, csv_header)
    return out


def _span_and_counts(cur, form, files, columns, out: Checked,
                     csv_header: list[str] | None = None) -> None:
    """Time span, empty token counts and whether some ts has no zone (one scan of three
    columns; a Parquet timestamp without a zone says so in its type)."""
    kind = columns["ts"]
    naive = (f"count(*) FILTER (WHERE NOT {duckdb_has_offset('ts')})"
             if kind == "VARCHAR" else ("0" if kind == "TIMESTAMP WITH TIME ZONE" else "1"))
    got = cur.execute(
        f"SELECT min({_ts_sql(kind)}), max({_ts_sql(kind)}), count(*) FILTER (WHERE "
        f"prompt_tokens IS NULL OR completion_tokens IS NULL), {naive}, count(*) "
        f"FROM {_reader(form, files, csv_header)}").fetchone()
    out.ts_min, out.ts_max, out.empty_tokens = got[0], got[1], int(got[2])
    out.naive_ts, out.rows = bool(got[3]), int(got[4])


# -- the ledger -------------------------------------------------------------------------------

def record(cur, dataset_id: int, pattern: str, form: str, files: list[tuple],
           columns: dict[str, str], csv_header: list[str] | None = None) -> None:
    """Keep (or replace) what was validated: pattern, form, files with size and time,
    columns (and a CSV's header, in its order)."""
    _run(cur, "DELETE FROM attached WHERE dataset_id = ?", [dataset_id])
    from analytics.store.core import _now

    _run(cur, "INSERT INTO attached VALUES (?, ?, ?, ?, ?, ?)",
         [dataset_id, pattern, form, json.dumps([list(f) for f in files]),
          json.dumps({"columns": columns, "csv_header": csv_header}), _now()])


def attachment(cur, dataset_id: int) -> dict | None:
    """The attachment record of a dataset (``pattern``, ``form``, ``files`` as
    ``[path, bytes, modified]``, ``columns``, ``validated_at``), or None for a stored one."""
    row = _run(cur, "SELECT pattern, form, files, columns, validated_at FROM attached "
                    "WHERE dataset_id = ?", [dataset_id]).fetchone()
    if row is None:
        return None
    layout = json.loads(row[3])
    return {"pattern": row[0], "form": row[1], "files": json.loads(row[2]),
            "columns": layout["columns"], "csv_header": layout["csv_header"],
            "validated_at": row[4]}


def changed_files(att: dict) -> list[str]:
    """The recorded files whose size or modification time is no longer what was validated, or
    that are gone (local files: one ``stat`` each; object storage is not stat'ed here)."""
    if is_remote(att["pattern"]):
        return []
    out = []
    for path, size, mtime_ns in att["files"]:
        try:
            st = os.stat(path)
        except OSError:
            out.append(f"{path} (gone)")
            continue
        if st.st_size != size:
            out.append(f"{path} ({size:,} -> {st.st_size:,} bytes)")
        elif st.st_mtime_ns != mtime_ns:
            out.append(f"{path} (modified since)")
    return out


def source(cur, dataset_id: int, name: str | None = None) -> str:
    """The relation a read of ``dataset_id``'s request rows scans: ``requests`` for a stored
    dataset, the files' subquery for an attached one.

    Raises
    ------
    AttachedChanged
        A recorded file changed or is gone (its name, and how to refresh).
    """
    att = attachment(cur, dataset_id)
    if att is None:
        return "requests"
    changed = changed_files(att)
    if changed:
        label = name or _run(cur, "SELECT name FROM datasets WHERE dataset_id = ?",
                             [dataset_id]).fetchone()[0]
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        raise AttachedChanged(
            f"attached dataset {label}: files changed since they were validated: "
            f"{'; '.join(changed[:3])}{more}. Check them again with headroom attach --refresh "
            f"{label} (or Refresh on the Data page)",
            public=f"attached dataset {label}: its files changed since they were validated; "
                   "refresh it on the Data page (or headroom attach --refresh)")
    _remote_ready(cur, att["pattern"])
    return relation(att["form"], [f[0] for f in att["files"]], att["columns"], dataset_id,
                    att["csv_header"])


def listing_sha256(pattern: str, files: list[tuple]) -> str:
    """The attached dataset's version: sha256 of its pattern and every file's name, size and
    modification time (the ledger's ``sha256``, unique as a stored file's)."""
    import hashlib

    text = json.dumps([pattern, [list(f) for f in files]])
    return "attached:" + hashlib.sha256(text.encode()).hexdigest()


def register(con, name: str, pattern: str, form: str, files: list[tuple],
             columns: dict[str, str], checked: Checked, warnings: tuple[str, ...],
             sources: dict, assumptions: tuple[str, ...], refresh: bool = False,
             csv_header: list[str] | None = None) -> dict:
    """Write the attached dataset's ledger row, file list and attachment (one transaction;
    ``refresh``: replace those of the existing dataset ``name``, keeping its id). Moves the
    data version. Returns the ingest-report row.

    Raises
    ------
    NameTaken
        ``name`` is held (attach), or not an attached dataset (refresh: UnknownDataset).
    """
    from analytics.store.core import (
        NameTaken,
        UnknownDataset,
        _bump_data_version,
        _now,
        transaction,
    )

    sha = listing_sha256(pattern, files)
    with con.cursor() as cur, transaction(cur):
        row = _run(cur, "SELECT dataset_id FROM datasets WHERE name = ?", [name]).fetchone()
        if refresh:
            if row is None or attachment(cur, row[0]) is None:
                raise UnknownDataset(name)
            dataset_id = int(row[0])
            _run(cur, "DELETE FROM dataset_files WHERE dataset_id = ?", [dataset_id])
            _run(cur, "DELETE FROM datasets WHERE dataset_id = ?", [dataset_id])
        elif row is not None:
            raise NameTaken(f"a dataset named {name!r} exists: pick another name "
                            "(or headroom attach --refresh to check an attached one again)")
        held = _run(cur, "SELECT name FROM datasets WHERE sha256 = ? AND name <> ?",
                    [sha, name]).fetchone()
        if held is not None:
            raise AttachRefused(f"{pattern}: these files are attached already, as dataset "
                                f"{held[0]}")
        else:
            dataset_id = int(_run(cur, "SELECT nextval('dataset_id_seq')").fetchone()[0])
        _run(cur, "INSERT INTO datasets (dataset_id, name, kind, format, source, sha256, rows, "
                  "ts_min, ts_max, resolution_s, ingested_at, synthetic, warnings, source_tz) "
                  "VALUES (?, ?, 'requests', ?, ?, ?, ?, ?, ?, 1e-6, ?, false, ?, NULL)",
             [dataset_id, name, f"attached_{form}", pattern, sha, checked.rows, checked.ts_min,
              checked.ts_max, _now(), "\n".join(warnings)])
        _run(cur, "INSERT INTO dataset_files (dataset_id, sha256, file, format, rows, dropped, "
                  "ts_min, ts_max, added_at, sources, assumptions) "
                  "VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?)",
             [dataset_id, sha, pattern, f"attached_{form}", checked.rows, checked.ts_min,
              checked.ts_max, _now(), json.dumps(sources), json.dumps(list(assumptions))])
        record(cur, dataset_id, pattern, form, files, columns, csv_header)
        _bump_data_version(cur)
    from analytics.schema import note_dict

    return {"file": pattern, "dataset": name, "dataset_id": dataset_id,
            "status": "refreshed" if refresh else "attached", "format": f"attached_{form}",
            "table": "requests", "pattern": pattern, "form": form, "files": len(files),
            "bytes": sum(int(f[1]) for f in files), "rows": checked.rows,
            "ts_min": checked.ts_min.isoformat() if checked.ts_min is not None else None,
            "ts_max": checked.ts_max.isoformat() if checked.ts_max is not None else None,
            "checks": list(checked.checks), "sources": dict(sources),
            "assumptions": list(assumptions), "warnings": [note_dict(w) for w in warnings]}


def status(con, name: str) -> dict:
    """An attached dataset's state against its files now: ``changed`` (recorded files changed
    or gone), ``new`` (files the pattern matches that were not validated; not read until a
    refresh), ``files`` recorded, ``validated_at``. Raises UnknownDataset; AttachRefused (a
    stored dataset)."""
    from analytics.store.core import UnknownDataset

    with con.cursor() as cur:
        row = _run(cur, "SELECT dataset_id FROM datasets WHERE name = ?", [name]).fetchone()
        if row is None:
            raise UnknownDataset(name)
        att = attachment(cur, int(row[0]))
    if att is None:
        raise AttachRefused(f"{name} is a stored dataset, not an attached one")
    known = {f[0] for f in att["files"]}
    try:
        now = [f[0] for f in list_files(con, att["pattern"])]
    except AttachRefused:
        now = []
    return {"dataset": name, "pattern": att["pattern"], "form": att["form"],
            "files": len(att["files"]), "bytes": sum(int(f[1]) for f in att["files"]),
            "validated_at": att["validated_at"].isoformat(),
            "changed": changed_files(att), "new": [p for p in now if p not in known]}


def local_files(con) -> tuple[str, ...]:
    """Every local file an attached dataset reads (object storage is not stat'ed): what a
    cache stamps besides the store file, since a changed file moves no store byte."""
    with con.cursor() as cur:
        rows = _run(cur, "SELECT pattern, files FROM attached ORDER BY dataset_id").fetchall()
    return tuple(f[0] for pattern, files in rows if not is_remote(pattern)
                 for f in json.loads(files))


def files_stamp(paths: tuple[str, ...]) -> tuple:
    """``(bytes, mtime ns)`` of each path (None where it is gone): moves when a file changes."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_size, st.st_mtime_ns))
    return tuple(out)


def attached_names(con) -> dict[str, int]:
    """Name -> dataset id of every attached dataset."""
    with con.cursor() as cur:
        return dict(_run(cur, "SELECT d.name, d.dataset_id FROM attached a JOIN datasets d "
                              "USING (dataset_id) ORDER BY d.dataset_id").fetchall())
