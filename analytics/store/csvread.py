"""DuckDB's side of the one road of request traces (:mod:`analytics.ingest.fastcsv`): the
``read_csv`` statement of a format's plan, the batches read from it on a connection of its own,
the columns a direct ``INSERT ... SELECT`` keeps, and the one scan that judges the stored rows
by :data:`analytics.schema.RULES`. The plan (what a format reads and how a batch is checked)
stays with the formats; every DuckDB call is here, behind the store (issue 28).
"""

from __future__ import annotations

import duckdb

from analytics.schema import COLUMNS, RULES, TS_ACCEPTED

#: Memory DuckDB's CSV reader may hold (its buffers; the batches are on top). It reads with one
#: thread: the store's INSERT uses the others, and a parallel reader ran ahead of the insert by
#: a few hundred MB at 20 M rows.
READER_MEMORY = "128MB"


class ReadFailed(Exception):
    """DuckDB could not bind or read the file (its message): the checked reader judges it."""


def quoted(name: str) -> str:
    """``name`` as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """``text`` as a DuckDB string literal."""
    return "'" + text.replace("'", "''") + "'"


def read_csv_sql(columns: dict[str, str], select: str, timestampformat: str | None,
                 gzip: bool) -> str:
    """The plan's query over ``read_csv`` of the one parameter (the file's path): explicit
    ``columns`` (header field -> type, no detection), strict rows, the compression said (an
    upload's generated name has no suffix), ``select`` over the cells."""
    cols = ", ".join(f"{literal(k)}: {literal(v)}" for k, v in columns.items())
    fmt = "" if timestampformat is None else f", timestampformat = {literal(timestampformat)}"
    packed = "gzip" if gzip else "none"
    return (f"SELECT {select} FROM read_csv(?, header = true, auto_detect = false, "
            f"delim = ',', quote = '\"', escape = '\"', strict_mode = true, "
            f"null_padding = false, compression = '{packed}', columns = {{{cols}}}{fmt}) "
            "AS cells")


def open_batches(sql: str, path: str, batch_rows: int):
    """Run ``sql`` over ``path`` on a connection of its own (bounded memory, one thread, UTC):
    ``(connection, an empty polars frame of the result's schema, a pyarrow reader of batches of
    batch_rows rows)``. The caller closes the connection when the reader is done.

    Raises
    ------
    ReadFailed
        DuckDB cannot bind the query (a header that does not fit the plan, ...).
    """
    con = duckdb.connect(config={"memory_limit": READER_MEMORY, "threads": 1})
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET enable_progress_bar = false")
        relation = con.sql(sql, params=[path])
        # the schema from DuckDB's own empty result: pyarrow's ``empty_table()`` imports
        # pandas (0.5 s of CPU, a third of a 2 M-row ingest; issue 15)
        empty = relation.limit(0).pl()
        return con, empty, relation.to_arrow_reader(batch_rows)
    except duckdb.Error as exc:
        con.close()
        raise ReadFailed(f"DuckDB: {exc}") from exc


def selected_columns(cur, sql: str, path: str) -> list[str]:
    """The column names ``sql`` gives over ``path`` (nothing read). Raises ReadFailed."""
    try:
        return [d[0] for d in cur.execute(f"SELECT * FROM ({sql}) LIMIT 0", [path]).description]
    except duckdb.Error as exc:
        raise ReadFailed(f"DuckDB: {exc}") from exc


def rules_sql(table: str, columns: list[str]) -> list[str]:
    """SQL aggregates, true when some row of the group breaks a rule that
    :func:`analytics.ingest.rowcheck.check_rules` would refuse or note, or has a time outside
    :data:`~analytics.schema.TS_ACCEPTED` (``ts_out_of_range``), over the canonical ``columns``
    of ``table``. Bounds are checked on the column's ``min`` / ``max`` (the whole check of a
    5 M-row Azure trace: 0.03 s of CPU instead of 0.09 s with a test per row); only a floating
    column's finiteness and whole counts are tested row by row."""
    out = []
    for col in columns:
        kind, rule = COLUMNS[table][col], RULES.get(table, {}).get(col)
        if kind == "TIMESTAMP":
            first, end = (literal(f"{t:%Y-%m-%d %H:%M:%S}") for t in TS_ACCEPTED)
            out.append(f"min({col}) < TIMESTAMP {first} OR max({col}) >= TIMESTAMP {end}")
        if kind in ("DOUBLE", "FLOAT"):
            out.append(f"bool_or(NOT isfinite({col}))")
            if rule is not None and rule.integer:
                out.append(f"bool_or({col} <> round({col}))")
        if rule is not None and rule.low is not None:
            out.append(f"min({col}) < {rule.low!r}")
        if rule is not None and rule.high is not None:
            out.append(f"max({col}) > {rule.high!r}")
    return [f"coalesce({c}, false)" for c in out]


def stored_check(cur, table: str, dataset_id: int, canonical: str, columns: list[str],
                 soft: str, counts: list[str]) -> tuple:
    """One scan of the rows a direct insert stored under ``dataset_id`` in the stored ``table``
    (in insertion order, as DuckDB scans them): ``(rows, ts_min, ts_max, any rule broken, rows
    for the batch checks (``soft``, or a time before the previous row's), *counts)``.
    ``canonical``: the canonical table the rules are stated for. Raises ReadFailed."""
    hard = " OR ".join(rules_sql(canonical, columns)) or "false"
    extra = "".join(f", {sql}" for sql in counts)
    try:
        return cur.execute(
            f"SELECT count(*), min(ts), max(ts), {hard}, count(*) FILTER "
            f"(({soft}) OR ts < __prev){extra} FROM (SELECT {', '.join(columns)}, "
            f"lag(ts) OVER () AS __prev FROM {table} WHERE dataset_id = ?) AS stored",
            [dataset_id]).fetchone()
    except duckdb.Error as exc:
        raise ReadFailed(f"DuckDB: {exc}") from exc
