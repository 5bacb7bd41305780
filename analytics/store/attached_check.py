"""The check of an attached file set (:mod:`analytics.store.attached`): the rules of
:data:`analytics.schema.RULES`, for Parquet from the row groups' statistics and one scan of the
columns they do not decide, for CSV by one scan with DuckDB's rejects table; the first value
refused is returned as a :class:`Violation`, for the ingest road to name its line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from analytics.schema import COLUMNS, RULES, TS_ACCEPTED
from analytics.store.attached_files import (
    AttachRefused,
    _reader,
    _remote_ready,
    _short,
    _ts_sql,
    listed,
    literal,
    quoted,
)
from analytics.timelayouts import duckdb_has_offset


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


def _bounds(col: str) -> list[tuple[str, str]]:
    """(SQL condition true on a value the rules refuse, reason) for a numeric column."""
    rule, q = RULES["requests"].get(col), quoted(col)
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


def _row_conditions(columns: dict[str, str], scanned: set[str]) -> list[tuple]:
    """(condition over the raw columns, column, reason) checked row by row on ``scanned``."""
    out = []
    for col in scanned:
        kind, q = columns[col], quoted(col)
        if col == "ts":
            out.append((f"{q} IS NULL", "ts", "empty value"))
            if kind == "VARCHAR":
                out.append((f"{_ts_sql(kind)} IS NULL", "ts",
                            "not a timestamp in ISO 8601 (with an optional offset)"))
            first, end = (f"TIMESTAMP {literal(f'{t:%Y-%m-%d %H:%M:%S}')}" for t in TS_ACCEPTED)
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
    names = listed(files)
    rows = cur.execute(
        f"SELECT path_in_schema, count(*), count(stats_min), count(stats_max), "
        f"count(stats_null_count), min(TRY_CAST(stats_min AS DOUBLE)), "
        f"max(TRY_CAST(stats_max AS DOUBLE)), min(stats_min), max(stats_max), "
        f"sum(stats_null_count) FROM parquet_metadata({names}) GROUP BY 1").fetchall()
    by = {r[0]: r for r in rows}
    # a column some file lacks (union_by_name: NULL there) has fewer row groups than the files
    groups = cur.execute(f"SELECT count(*) FROM (SELECT DISTINCT file_name, row_group_id "
                         f"FROM parquet_metadata({names}))").fetchone()[0]
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
    names = listed(files)
    out.rows = int(cur.execute(f"SELECT coalesce(sum(num_rows), 0) FROM "
                               f"parquet_file_metadata({names})").fetchone()[0])
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
    conds = _row_conditions(columns, scanned)
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
    conds = _row_conditions(columns, {c for c in COLUMNS["requests"] if c in columns
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
