"""The DuckDB store: connection, migration runner and every SQL statement headroom runs.

This is the only module that imports ``duckdb``. Every function here opens its own cursor
(``with con.cursor() as cur``), because DuckDB refuses concurrent use of one connection from
several threads and Streamlit runs sessions on threads. Results are materialised (pandas) before
they are returned.

**Sharing the store.** DuckDB lets one process write a database file, or several read it. So
connections are short-lived (the app and the CLI open one per request or command and close it),
readers open it read-only (:func:`connect` with ``read_only=True``: the app's pages, the CLI's
read commands) and writers read-write. An open that meets a lock held by another process (or a
connection of the other mode in this one) is retried with exponential back-off for ``wait_s``
seconds (``$HEADROOM_STORE_WAIT_S``, default 20); if the store stays busy, :class:`StoreBusy`
names the process that holds it and what to do.

Ingest is one transaction: a batch of parsed files is written completely or not at all, and a
file whose bytes (sha256) are already in the ledger is reported as ``duplicate`` and skipped.

The table definitions and the forward migrations (:data:`MIGRATIONS`, :data:`SCHEMA_VERSION`)
live in :mod:`analytics.schema`, built from the canonical columns. Every statement runs through
:func:`_run`, so a failing statement raises :class:`StoreError` with
the SQL attached (the Splink pattern: the database error, then the statement that failed), and
every multi-statement write runs inside :func:`transaction`.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl

from analytics.config import Weights, check_dataset_name
from analytics.schema import (
    CANONICAL,
    MIGRATIONS,
    SCHEMA_VERSION,  # noqa: F401 - callers read store.SCHEMA_VERSION
    Parsed,
    conform,
    note_dict,
)

DATA_TABLES = tuple(CANONICAL)


class StoreError(RuntimeError):
    """A statement failed; carries the SQL that failed."""

    def __init__(self, message: str, sql: str | None = None):
        self.sql = sql
        super().__init__(message + (f"\n-- failing SQL:\n{sql.strip()}" if sql else ""))


class StoreBusy(StoreError):
    """Another process (or a connection of the other mode in this one) kept the store locked
    for longer than the wait; the message names the holder and what to do."""


class NameTaken(ValueError):
    """A dataset of this name exists with other content; the message says how to ingest the
    file anyway (another ``--name``, or delete the old dataset)."""


class UnknownDataset(KeyError):
    """No dataset of that name."""

    def __str__(self) -> str:
        return f"no dataset named {self.args[0]!r}"


#: Fragments of DuckDB's messages for a file another connection holds (worth a retry).
_LOCK_MARKERS = ("Could not set lock", "Conflicting lock", "different configuration",
                 "database is locked", "being used by another process")


def default_wait_s() -> float:
    """Seconds to wait for a busy store: ``$HEADROOM_STORE_WAIT_S``, default 20."""
    return float(os.environ.get("HEADROOM_STORE_WAIT_S", 20))


def connect(path: str | Path, read_only: bool = False,
            wait_s: float | None = None) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the store at ``path`` with its schema up to date.

    Parameters
    ----------
    path : DuckDB file, or ``":memory:"``
    read_only : open for reading only, so other readers (the app, other CLI commands) can hold
        it at the same time. A missing or outdated store is first created / migrated by a short
        read-write open.
    wait_s : how long to retry while another connection holds a conflicting lock (default
        :func:`default_wait_s`)

    Raises
    ------
    StoreBusy
        The store stayed locked for ``wait_s`` seconds; says by which process.
    StoreError
        The file is not a DuckDB database or cannot be opened for another reason.
    """
    path = Path(path)
    wait_s = default_wait_s() if wait_s is None else wait_s
    if str(path) == ":memory:":
        con = duckdb.connect(":memory:")
        migrate(con)
        return con
    path.parent.mkdir(parents=True, exist_ok=True)
    if read_only and not _is_current(path, wait_s):
        with _open(path, False, wait_s) as con:
            migrate(con)
    con = _open(path, read_only, wait_s)
    if not read_only:
        migrate(con)
    return con


def _is_current(path: Path, wait_s: float) -> bool:
    """Whether ``path`` exists and its schema is at :data:`SCHEMA_VERSION` (read-only check)."""
    if not path.exists():
        return False
    with _open(path, True, wait_s) as con:
        try:
            got = con.execute("SELECT max(version) FROM schema_version").fetchone()[0]
        except duckdb.CatalogException:
            return False
    return got == SCHEMA_VERSION


def _open(path: Path, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect`` retried with back-off (50 ms doubling to 1 s) while locked."""
    deadline, delay = time.monotonic() + wait_s, 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as exc:
            message = str(exc)
            if not any(m in message for m in _LOCK_MARKERS):
                raise StoreError(f"cannot open store {path}: {exc}") from exc
            if time.monotonic() + delay > deadline:
                raise StoreBusy(_busy_message(path, message, wait_s, read_only)) from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _busy_message(path: Path, duckdb_message: str, wait_s: float, read_only: bool) -> str:
    """Who holds the store (PID and command line, when DuckDB names it) and what to do."""
    pid = re.search(r"PID (\d+)", duckdb_message)
    holder = "another connection in this process"
    if pid:
        holder = f"process {pid.group(1)}"
        try:
            cmd = Path(f"/proc/{pid.group(1)}/cmdline").read_bytes().replace(b"\0", b" ")
            holder += f" ({cmd.decode(errors='replace').strip()[:120]})"
        except OSError:
            pass
    want = "read" if read_only else "write"
    return (f"the store {path} is busy: {holder} has it open, and it stayed locked for "
            f"{wait_s:g} s while this one waited to {want} it. Wait for that command or page "
            "to finish and try again, stop it, or use another store (--db / HEADROOM_DB); "
            "set HEADROOM_STORE_WAIT_S to wait longer.")


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply pending migrations in one transaction; return the schema version now in force."""
    with con.cursor() as cur:
        _run(cur, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER, applied_at TIMESTAMP)")
        current = _run(cur, "SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]
        for version in sorted(v for v in MIGRATIONS if v > current):
            with transaction(cur):
                for sql in MIGRATIONS[version]:
                    _run(cur, sql)
                _run(cur, "INSERT INTO schema_version VALUES (?, ?)", [version, _now()])
            current = version
    return current


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _run(cur, sql: str, params=None):
    """Execute one statement on ``cur``; return the cursor (for ``fetchone`` / ``df``).

    Raises
    ------
    StoreError
        The statement failed; the message is DuckDB's, followed by the failing SQL, and
        ``exc.sql`` holds the statement.
    """
    try:
        return cur.execute(sql, params) if params is not None else cur.execute(sql)
    except duckdb.Error as exc:
        raise StoreError(str(exc), sql) from exc


@contextmanager
def transaction(cur) -> Iterator:
    """Run the body as one transaction on cursor ``cur``: commit on success, roll back on any
    exception (including KeyboardInterrupt) and re-raise it.

    Raises
    ------
    StoreError
        BEGIN, COMMIT or ROLLBACK failed (with the SQL attached).
    """
    _run(cur, "BEGIN TRANSACTION")
    try:
        yield cur
        _run(cur, "COMMIT")
    except BaseException:
        _run(cur, "ROLLBACK")
        raise


def _bump_data_version(cur) -> None:
    _run(cur, "UPDATE meta SET value = value + 1 WHERE key = 'data_version'")


def data_version(con) -> int:
    """A number that changes whenever any dataset is added or removed (cache key)."""
    with con.cursor() as cur:
        return int(_run(cur, "SELECT value FROM meta WHERE key = 'data_version'").fetchone()[0])


@dataclass(frozen=True)
class IngestItem:
    """One parsed file to write: rows, the dataset name, and the sha256 of its bytes.

    ``alternatives``: None keeps ``name`` strict (a name held by other content raises
    :class:`NameTaken`, the CLI's ``--name`` semantics); a tuple lets :func:`ingest` pick a
    free name instead: each alternative in turn, then ``name-2``, ``name-3`` ... (browser
    uploads, whose users cannot rename a file mid-upload).
    """

    parsed: Parsed
    name: str
    sha256: str
    synthetic: bool = False
    alternatives: tuple[str, ...] | None = None


def ingest(con, items: list[IngestItem]) -> list[dict]:
    """Write parsed files as new datasets, all in one transaction.

    Returns
    -------
    list of dict, one per item: ``{"file", "dataset", "format", "rows", "status"}`` with status
    ``"ingested"`` or ``"duplicate"`` (same bytes already stored: no rows written). A duplicate
    site file whose rows name another site than the stored copy (SustainDC's ``CISO_...`` and
    ``CA_...``) registers that code as an alias of the stored site (``site_alias``:
    ``{"alias", "site"}``; :func:`site_catalog`, :func:`site_hourly`).

    Raises
    ------
    NameTaken
        A dataset with that name holds other bytes and the item allows no other name
        (``alternatives`` None). Nothing of the batch is written.
    ValueError
        A name outside the dataset-name character set (``config.DATASET_NAME``). Nothing of
        the batch is written.
    StoreError
        A statement failed. Nothing of the batch is written.
    """
    results, changed = [], False
    with con.cursor() as cur, transaction(cur):
        seen_names = set()
        for item in items:
            p = item.parsed
            dup = _run(cur, "SELECT name, dataset_id FROM datasets WHERE sha256 = ?",
                       [item.sha256]).fetchone()
            if dup:
                alias, new_alias = _site_alias(cur, dup[1], p)
                changed |= new_alias
                results.append({"file": p.source, "dataset": dup[0], "format": p.format,
                                "rows": 0, "status": "duplicate",
                                "hint": f"these bytes are already dataset {dup[0]!r}; "
                                        "delete it first to ingest them with other "
                                        "options or another name"
                                        + (f"; site {alias['alias']!r} names its series (site "
                                           f"{alias['site']!r}) too" if alias else ""),
                                **({"site_alias": alias} if alias else {})})
                continue
            if _taken(cur, item.name, seen_names):
                if item.alternatives is None:
                    raise NameTaken(
                        f"{p.source}: a dataset named {item.name!r} already exists with other "
                        f"content; ingest this file under another name (`headroom ingest "
                        f"--name NEW_NAME {p.source}`, one file per call) or delete the old "
                        f"dataset first (`headroom delete {item.name}`)"
                    )
                item = _renamed(cur, item, seen_names)
            check_dataset_name(item.name)  # ValueError: nothing of the batch is written
            seen_names.add(item.name)
            results.append(_insert(cur, item))
        if changed or any(r["status"] == "ingested" for r in results):
            _bump_data_version(cur)
    return results


def _site_alias(cur, dataset_id: int, p: Parsed) -> tuple[dict | None, bool]:
    """A duplicate's site code kept as an alias of the stored dataset's site: the same bytes
    arrived under another site name (SustainDC ``CISO_...`` and ``CA_...``), so dispatch and
    the site lists accept both codes for the one stored series.

    Only for site tables (carbon, weather, prices) when the stored rows and the duplicate's
    rows each carry one site and the two differ. Returns ``({"alias", "site"} or None, whether
    the alias is new)``.
    """
    if p.table not in SITE_TABLES or "site" not in p.frame.columns:
        return None, False
    incoming = p.frame["site"].drop_nulls().unique().to_list()
    stored = [r[0] for r in _run(cur, f"SELECT DISTINCT site FROM {p.table} WHERE dataset_id = ?",
                                 [dataset_id]).fetchall()]
    if len(incoming) != 1 or len(stored) != 1 or str(incoming[0]) == stored[0]:
        return None, False
    alias = {"alias": str(incoming[0]), "site": stored[0]}
    new = _run(cur, "SELECT 1 FROM site_aliases WHERE dataset_id = ? AND alias = ?",
               [dataset_id, alias["alias"]]).fetchone() is None
    if new:
        _run(cur, "INSERT INTO site_aliases (dataset_id, tbl, site, alias, file) "
                  "VALUES (?, ?, ?, ?, ?)", [dataset_id, p.table, alias["site"], alias["alias"],
                                             p.source])
    return alias, new


def _taken(cur, name: str, seen: set[str]) -> bool:
    """Whether ``name`` is a stored dataset or already used by this batch."""
    return name in seen or _run(cur, "SELECT 1 FROM datasets WHERE name = ?",
                                [name]).fetchone() is not None


def _renamed(cur, item: IngestItem, seen: set[str]) -> IngestItem:
    """``item`` under the first free name of its alternatives, then ``name-2``, ``name-3`` ...,
    with a first warning saying which name it got and why."""
    candidates = [*(item.alternatives or ()), *(f"{item.name}-{k}" for k in range(2, 10_000))]
    new = next(c for c in candidates if not _taken(cur, c, seen))
    why = (f"dataset named {new!r}: the name {item.name!r} is already used by other content "
           "(another file of this upload or a stored dataset)")
    parsed = replace(item.parsed, warnings=(why, *item.parsed.warnings))
    return replace(item, name=new, parsed=parsed)


def _insert(cur, item: IngestItem) -> dict:
    p = item.parsed
    frame = conform(p.frame, p.table)  # optional columns a format does not have are empty
    dataset_id = _run(cur, "SELECT nextval('dataset_id_seq')").fetchone()[0]
    ts_col = "ts" if "ts" in frame.columns else ("submit_ts" if "submit_ts" in frame.columns
                                                  else None)
    ts_min = frame[ts_col].min() if ts_col and frame.height else None
    ts_max = frame[ts_col].max() if ts_col and frame.height else None
    _run(
        cur,
        "INSERT INTO datasets (dataset_id, name, kind, format, source, sha256, rows, ts_min, "
        "ts_max, resolution_s, ingested_at, synthetic, warnings, source_tz) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [dataset_id, item.name, p.table, p.format, p.source, item.sha256, frame.height,
         ts_min, ts_max, p.resolution_s, _now(), item.synthetic, "\n".join(p.warnings),
         p.source_tz],
    )
    _insert_frame(cur, p.table, frame, dataset_id)
    return {"file": p.source, "dataset": item.name, "format": p.format, "rows": frame.height,
            "status": "ingested", "table": p.table, "source_tz": p.source_tz,
            "ts_min": ts_min.isoformat() if ts_min is not None else None,
            "ts_max": ts_max.isoformat() if ts_max is not None else None,
            "warnings": [note_dict(w) for w in p.warnings]}


def _insert_frame(cur, table: str, frame: pl.DataFrame, dataset_id: int) -> None:
    """Append a conformed frame's rows to ``table`` under ``dataset_id``."""
    cols = ", ".join(CANONICAL[table])
    cur.register("incoming", frame.to_arrow())
    try:
        _run(cur, f"INSERT INTO {table} (dataset_id, {cols}) "
                  f"SELECT ? AS dataset_id, {cols} FROM incoming", [dataset_id])
    finally:
        cur.unregister("incoming")


def delete_dataset(con, name: str) -> None:
    """Remove a dataset and its rows (one transaction). Raises UnknownDataset."""
    with con.cursor() as cur, transaction(cur):
        row = _run(cur, "SELECT dataset_id, kind FROM datasets WHERE name = ?", [name]).fetchone()
        if row is None:
            raise UnknownDataset(name)
        _run(cur, f"DELETE FROM {row[1]} WHERE dataset_id = ?", [row[0]])
        _run(cur, "DELETE FROM site_aliases WHERE dataset_id = ?", [row[0]])
        _run(cur, "DELETE FROM datasets WHERE dataset_id = ?", [row[0]])
        _bump_data_version(cur)


def list_datasets(con) -> pd.DataFrame:
    """The ledger, oldest first: dataset_id, name, kind, format, source, rows, ts_min, ts_max,
    resolution_s, source_tz (IANA zone local times were converted from; None: UTC as written),
    ingested_at, synthetic, warnings."""
    with con.cursor() as cur:
        return _run(
            cur,
            "SELECT dataset_id, name, kind, format, source, rows, ts_min, ts_max, resolution_s, "
            "source_tz, ingested_at, synthetic, warnings FROM datasets ORDER BY dataset_id",
        ).df()


def dataset(con, name: str) -> dict:
    """One ledger row as a dict. Raises UnknownDataset."""
    with con.cursor() as cur:
        df = _run(cur, "SELECT * FROM datasets WHERE name = ?", [name]).df()
    if df.empty:
        raise UnknownDataset(name)
    return df.iloc[0].to_dict()


def table_counts(con) -> dict[str, int]:
    """Row count of the ledger and of every canonical table."""
    with con.cursor() as cur:
        return {
            t: int(_run(cur, f"SELECT count(*) FROM {t}").fetchone()[0])
            for t in ("datasets", *DATA_TABLES)
        }


def dataset_rows(con, name: str) -> pd.DataFrame:
    """All rows of one dataset in its canonical columns, in time order."""
    info = dataset(con, name)
    cols = ", ".join(CANONICAL[info["kind"]])
    cols_k = CANONICAL[info["kind"]]
    order = "ts" if "ts" in cols_k else ("submit_ts" if "submit_ts" in cols_k else "1")
    with con.cursor() as cur:
        return _run(
            cur, f"SELECT {cols} FROM {info['kind']} WHERE dataset_id = ? ORDER BY {order}",
            [int(info["dataset_id"])],
        ).df()


#: Per dataset kind, the summary aggregates (SQL over that kind's table, one row).
_RUNTIME_S = ("coalesce(elapsed_s, CASE WHEN end_ts > start_ts "
              "THEN epoch(end_ts) - epoch(start_ts) END)")
_SUMMARY_SQL = {
    "requests": """count(*) AS requests, count(*) FILTER (WHERE failed) AS failed_requests,
        sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
        count(*) FILTER (WHERE prompt_tokens IS NULL OR completion_tokens IS NULL)
            AS unknown_token_requests,
        count(DISTINCT model) AS models, sum(gpu_s) AS gpu_s""",
    "demand_series": """count(*) AS bins, min(bin_s) AS bin_s, sum(tokens) AS tokens,
        sum(requests) AS requests""",
    "jobs": f"""count(*) AS jobs, count(*) FILTER (WHERE n_gpus > 0) AS gpu_jobs,
        sum(coalesce(gpu_milli / 1000.0, n_gpus) * {_RUNTIME_S}) / 3600.0 AS gpu_hours,
        count(*) FILTER (WHERE n_gpus > 0 AND {_RUNTIME_S} IS NULL) AS gpu_jobs_without_runtime,
        count(*) FILTER (WHERE mig_slice) AS mig_jobs,
        string_agg(job_id, ', ' ORDER BY job_id) FILTER (WHERE mig_slice) AS mig_job_ids,
        count(*) FILTER (WHERE end_ts < start_ts) AS end_before_start""",
    "telemetry": """count(DISTINCT (host, gpu_id, gpu_uuid)) AS gpus, count(DISTINCT host) AS hosts,
        count(*) AS samples, avg(power_w) AS mean_power_w,
        count(*) FILTER (WHERE power_w IS NULL) AS samples_without_power""",
    "carbon_intensity": """count(DISTINCT (site, basis)) AS series, count(DISTINCT site) AS sites,
        count(*) AS hours, count(*) FILTER (WHERE gco2_per_kwh IS NULL) AS empty_values,
        avg(gco2_per_kwh) AS mean_gco2_per_kwh""",
    "weather": """count(DISTINCT site) AS sites, count(*) AS hours,
        count(*) FILTER (WHERE temp_c IS NULL) AS empty_values, avg(temp_c) AS mean_temp_c""",
    "prices": """count(DISTINCT site) AS sites, count(*) AS hours,
        count(*) FILTER (WHERE usd_per_mwh IS NULL) AS empty_values,
        avg(usd_per_mwh) AS mean_usd_per_mwh""",
    "bench_runs": """count(*) AS runs, count(DISTINCT model) AS models,
        string_agg(DISTINCT hardware, ', ' ORDER BY hardware) AS hardware,
        count(*) FILTER (WHERE concurrency_measured) AS measured_concurrency_runs""",
    "reference_cdf": """count(DISTINCT (source, cluster, metric)) AS curves, count(*) AS points""",
}


def dataset_summary(con, name: str) -> dict:
    """What one dataset holds, in its kind's terms (one row of aggregates).

    ``jobs``: jobs, GPU jobs, GPU-hours (GPUs, or the ``gpu_milli`` share, x the run time:
    Slurm's ``Elapsed`` when the source gives it, else end - start), GPU jobs without a run
    time, MIG-slice jobs and their ids, jobs whose End is before their Start; plus
    ``gpus_per_job`` ``{n_gpus: jobs}``. ``requests``: requests, failed, token sums, requests
    with an unknown token count, models, GPU-seconds. ``telemetry``: GPUs as (host, index,
    UUID), hosts, samples, mean power. Site tables: series, sites, hours, empty values, mean.
    ``bench_runs``: runs, models, hardware. Sums over no rows are None.

    Raises UnknownDataset.
    """
    info = dataset(con, name)
    kind, dataset_id = info["kind"], int(info["dataset_id"])
    with con.cursor() as cur:
        cur_ = _run(cur, f"SELECT {_SUMMARY_SQL[kind]} FROM {kind} WHERE dataset_id = ?",
                    [dataset_id])
        names = [d[0] for d in cur_.description]
        row = dict(zip(names, cur_.fetchone(), strict=True))
        if kind == "jobs":
            row["gpus_per_job"] = {int(n): int(c) for n, c in _run(
                cur, "SELECT n_gpus, count(*) FROM jobs WHERE dataset_id = ? AND n_gpus IS NOT "
                     "NULL GROUP BY n_gpus ORDER BY n_gpus", [dataset_id]).fetchall()}
    return {"dataset": name, "kind": kind, **row}


def requests_grid(con, dataset_id: int, bin_s: int, weights: Weights) -> pd.DataFrame:
    """Complete, zero-filled grid of one request dataset.

    Returns
    -------
    DataFrame with one row per bin from the first request's bin to the last one's:
    ``ts`` (bin start, UTC), ``requests``, ``failed``, ``prompt_tokens``, ``completion_tokens``,
    ``tokens`` (prompt + completion), ``gpu_s`` (GPU busy seconds, where the trace has them) and
    ``target``: weighted tokens (see :class:`analytics.config.Weights`), or GPU-seconds when
    ``weights.target == "gpu_seconds"``; ``unknown_tokens``: requests of the bin whose prompt or
    completion count is empty (Mooncake lines without ``output_length``, empty cells; 0 for the
    GPU-seconds target). Their known tokens are counted and the unknown ones are not (never a
    guess): in bins with ``unknown_tokens > 0`` the weighted-token target is a lower bound.
    Bins are aligned to the Unix epoch.
    """
    per_model = pd.DataFrame(list(weights.per_model), columns=["model", "w_p", "w_c"]).astype(
        {"model": "string", "w_p": "float64", "w_c": "float64"}
    )
    sql = """
    WITH src AS (
      SELECT time_bucket(to_seconds($bin), r.ts, TIMESTAMP '1970-01-01') AS bin,
             r.prompt_tokens, r.completion_tokens, r.failed, r.gpu_s,
             CASE WHEN $gpu THEN r.gpu_s
                  WHEN r.prompt_tokens IS NULL AND r.completion_tokens IS NULL THEN NULL
                  ELSE coalesce(mw.w_p, $wp) * coalesce(r.prompt_tokens, 0)
                       + coalesce(mw.w_c, $wc) * coalesce(r.completion_tokens, 0) END AS target,
             (NOT $gpu AND (r.prompt_tokens IS NULL OR r.completion_tokens IS NULL))::INTEGER
               AS unknown
      FROM requests r LEFT JOIN model_weights mw ON r.model = mw.model
      WHERE r.dataset_id = $id AND ($with_failed OR NOT r.failed)
    ), agg AS (
      SELECT bin, count(*) AS requests, sum(failed::INTEGER) AS failed,
             sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
             sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)) AS tokens,
             sum(gpu_s) AS gpu_s, sum(target) AS target, sum(unknown) AS unknown
      FROM src GROUP BY bin
    ), bounds AS (
      SELECT time_bucket(to_seconds($bin), min(ts), TIMESTAMP '1970-01-01') AS lo,
             time_bucket(to_seconds($bin), max(ts), TIMESTAMP '1970-01-01') AS hi
      FROM requests WHERE dataset_id = $id
    ), grid AS (
      SELECT unnest(generate_series(lo, hi, to_seconds($bin))) AS ts FROM bounds
    )
    SELECT g.ts,
           coalesce(a.requests, 0)::BIGINT AS requests,
           coalesce(a.failed, 0)::BIGINT AS failed,
           coalesce(a.prompt_tokens, 0)::DOUBLE AS prompt_tokens,
           coalesce(a.completion_tokens, 0)::DOUBLE AS completion_tokens,
           coalesce(a.tokens, 0)::DOUBLE AS tokens,
           coalesce(a.gpu_s, 0)::DOUBLE AS gpu_s,
           coalesce(a.target, 0)::DOUBLE AS target,
           coalesce(a.unknown, 0)::BIGINT AS unknown_tokens
    FROM grid g LEFT JOIN agg a ON g.ts = a.bin
    ORDER BY g.ts
    """
    params = {"bin": bin_s, "wp": weights.w_prompt, "wc": weights.w_completion,
              "id": dataset_id, "with_failed": weights.include_failed,
              "gpu": weights.target == "gpu_seconds"}
    with con.cursor() as cur:
        cur.register("model_weights", per_model)
        try:
            return _run(cur, sql, params).df()
        finally:
            cur.unregister("model_weights")


def request_fields(con, dataset_id: int) -> dict[str, bool]:
    """Which optional request fields a dataset actually has (any non-empty value)."""
    with con.cursor() as cur:
        row = _run(
            cur,
            "SELECT count(prompt_tokens) > 0, count(completion_tokens) > 0, count(gpu_s) > 0, "
            "count(model) > 0, count(latency_s) > 0 FROM requests WHERE dataset_id = ?",
            [dataset_id],
        ).fetchone()
    return dict(zip(("tokens", "completion_tokens", "gpu_s", "model", "latency_s"), row,
                    strict=True))


def series_grid(con, dataset_id: int, bin_s: int) -> pd.DataFrame:
    """Complete, zero-filled grid of a pre-binned ``demand_series`` dataset re-binned to ``bin_s``.

    Returns ``ts``, ``requests`` (NULL where the source has no counts), ``tokens`` and
    ``target`` (= tokens: pre-binned series carry no prompt / completion split, so weights do
    not apply).
    """
    sql = """
    WITH agg AS (
      SELECT time_bucket(to_seconds($bin), ts, TIMESTAMP '1970-01-01') AS bin,
             sum(requests) AS requests, count(requests) AS with_counts, sum(tokens) AS tokens
      FROM demand_series WHERE dataset_id = $id GROUP BY bin
    ), has AS (
      SELECT count(requests) > 0 AS has_counts FROM demand_series WHERE dataset_id = $id
    ), bounds AS (SELECT min(bin) AS lo, max(bin) AS hi FROM agg),
    grid AS (SELECT unnest(generate_series(lo, hi, to_seconds($bin))) AS ts FROM bounds)
    SELECT g.ts,
           CASE WHEN (SELECT has_counts FROM has) THEN coalesce(a.requests, 0) END::BIGINT
             AS requests,
           coalesce(a.tokens, 0)::DOUBLE AS tokens,
           coalesce(a.tokens, 0)::DOUBLE AS target
    FROM grid g LEFT JOIN agg a ON g.ts = a.bin
    ORDER BY g.ts
    """
    with con.cursor() as cur:
        return _run(cur, sql, {"bin": bin_s, "id": dataset_id}).df()


SITE_TABLES = {"carbon_intensity": "gco2_per_kwh", "weather": "temp_c", "prices": "usd_per_mwh"}


def site_catalog(con) -> pd.DataFrame:
    """Every site with hourly site data: table (``tbl``), ``site``, ``basis`` (carbon only),
    ``dataset``, ts range, ``rows`` and ``alias_of``: for a site code registered as an alias
    (:func:`ingest`: the same bytes under another site name), the stored site whose series it
    names, else None. An alias has the rows of its site, one row per (table, site, dataset)."""
    parts = []
    with con.cursor() as cur:
        for table in SITE_TABLES:
            basis = "basis" if table == "carbon_intensity" else "NULL"
            parts.append(_run(
                cur,
                f"SELECT '{table}' AS tbl, t.site, {basis} AS basis, d.name AS dataset, "
                "min(t.ts) AS ts_min, max(t.ts) AS ts_max, count(*) AS rows, "
                "NULL::VARCHAR AS alias_of "
                f"FROM {table} t JOIN datasets d USING (dataset_id) GROUP BY ALL "
                f"UNION ALL SELECT '{table}' AS tbl, a.alias AS site, {basis} AS basis, "
                "d.name AS dataset, min(t.ts) AS ts_min, max(t.ts) AS ts_max, count(*) AS rows, "
                f"a.site AS alias_of FROM {table} t "
                f"JOIN site_aliases a ON a.dataset_id = t.dataset_id AND a.site = t.site "
                f"AND a.tbl = '{table}' JOIN datasets d ON d.dataset_id = t.dataset_id "
                "GROUP BY ALL ORDER BY site, dataset"
            ).df())
    return pd.concat(parts, ignore_index=True)


def site_hourly(con, table: str, site: str, basis: str | None = None) -> pd.DataFrame:
    """Hourly mean of a site's series: ``ts`` (hour, UTC) and ``value`` (the table's unit).

    ``site`` may be an alias (:func:`site_catalog` ``alias_of``): the rows of the series it
    names are read as if stored under it. Raises KeyError for a table that holds no site series.
    """
    col = SITE_TABLES[table]
    where = ("(t.site = $site OR EXISTS (SELECT 1 FROM site_aliases a WHERE a.tbl = $tbl "
             "AND a.alias = $site AND a.dataset_id = t.dataset_id AND a.site = t.site))"
             + (" AND t.basis = $basis" if basis else ""))
    params = {"site": site, "tbl": table, **({"basis": basis} if basis else {})}
    with con.cursor() as cur:
        return _run(cur, f"""
            SELECT time_bucket(INTERVAL 1 HOUR, t.ts) AS ts, avg(t.{col}) AS value
            FROM {table} t WHERE {where} GROUP BY 1 ORDER BY 1""", params).df()


def gpu_jobs(con, name: str) -> pd.DataFrame:
    """GPU jobs of one ``jobs`` dataset that ran, in submit order (power simulation input).

    Returns
    -------
    DataFrame with ``job_id``, ``submit_ts``, ``start_ts``, ``end_ts`` (UTC), ``n_gpus``,
    ``gpu_milli`` (total thousandths of a GPU: the stored share, else ``n_gpus * 1000``) and
    ``runtime_s`` (end - start, > 0). Jobs without GPUs, never started, or without an end are
    left out. Raises UnknownDataset.
    """
    info = dataset(con, name)
    with con.cursor() as cur:
        return _run(cur, """
            SELECT job_id, submit_ts, start_ts, end_ts, n_gpus,
                   coalesce(gpu_milli, n_gpus * 1000)::INTEGER AS gpu_milli,
                   epoch(end_ts) - epoch(start_ts) AS runtime_s
            FROM jobs
            WHERE dataset_id = ? AND n_gpus > 0 AND start_ts IS NOT NULL AND end_ts IS NOT NULL
              AND end_ts > start_ts
            ORDER BY submit_ts, job_id""", [int(info["dataset_id"])]).df()


def gpu_jobs_left_out(con, name: str) -> pd.DataFrame:
    """GPU jobs of one ``jobs`` dataset that :func:`gpu_jobs` leaves out, in submit order.

    Returns
    -------
    DataFrame with ``job_id``, ``start_ts``, ``end_ts`` (UTC), ``runtime_s`` (end - start, s;
    NaN when a time is missing) and ``why``: ``no_start`` (never started), ``no_end`` (no end
    time), ``end_before_start`` (negative run time) or ``zero_runtime``. Raises UnknownDataset.
    """
    info = dataset(con, name)
    with con.cursor() as cur:
        return _run(cur, """
            SELECT job_id, start_ts, end_ts, epoch(end_ts) - epoch(start_ts) AS runtime_s,
                   CASE WHEN start_ts IS NULL THEN 'no_start' WHEN end_ts IS NULL THEN 'no_end'
                        WHEN end_ts < start_ts THEN 'end_before_start'
                        ELSE 'zero_runtime' END AS why
            FROM jobs
            WHERE dataset_id = ? AND n_gpus > 0
              AND NOT coalesce(end_ts > start_ts, false)
            ORDER BY submit_ts, job_id""", [int(info["dataset_id"])]).df()


def append_rows(con, name: str, frame: pl.DataFrame) -> int:
    """Add rows to an existing dataset (the NVML sampler's batches), one transaction.

    The ledger's row count and time span follow. Returns the dataset's row count after.
    Raises UnknownDataset.
    """
    info = dataset(con, name)
    table = info["kind"]
    dataset_id = int(info["dataset_id"])
    frame = conform(frame, table)
    with con.cursor() as cur:
        with transaction(cur):
            _insert_frame(cur, table, frame, dataset_id)
            _run(cur, f"""UPDATE datasets SET
                    rows = (SELECT count(*) FROM {table} WHERE dataset_id = $id),
                    ts_min = (SELECT min(ts) FROM {table} WHERE dataset_id = $id),
                    ts_max = (SELECT max(ts) FROM {table} WHERE dataset_id = $id)
                 WHERE dataset_id = $id""", {"id": dataset_id})
            _bump_data_version(cur)
        return int(_run(cur, "SELECT rows FROM datasets WHERE dataset_id = ?",
                        [dataset_id]).fetchone()[0])


def reference_cdfs(con) -> pd.DataFrame:
    """All reference distributions (source, cluster, metric, cdf_percent, value)."""
    with con.cursor() as cur:
        return _run(cur, "SELECT source, cluster, metric, cdf_percent, value FROM "
                         "reference_cdf ORDER BY source, cluster, metric, cdf_percent").df()


def bench_runs(con) -> pd.DataFrame:
    """Every benchmark row (canonical ``bench_runs`` columns plus ``dataset``), duplicates across
    datasets removed (Argonne repeats rows in several figure tables): one row per distinct
    measured configuration and result."""
    cols = ", ".join("b." + c for c in CANONICAL["bench_runs"])
    with con.cursor() as cur:
        return _run(
            cur,
            f"""SELECT min(d.name) AS dataset, {cols}
                FROM bench_runs b JOIN datasets d USING (dataset_id)
                GROUP BY ALL ORDER BY ALL""").df()


def jobs(con) -> pd.DataFrame:
    """Every row of the ``jobs`` table (canonical columns plus ``dataset``), all states, for
    launch-success priors (:func:`gpu_jobs` is the ran-GPU-jobs view the power simulation uses)."""
    cols = ", ".join("j." + c for c in CANONICAL["jobs"])
    with con.cursor() as cur:
        return _run(cur, f"SELECT d.name AS dataset, {cols} FROM jobs j "
                         "JOIN datasets d USING (dataset_id) ORDER BY d.name, j.submit_ts").df()


def add_model_version(con, rows: int, metrics: dict, envelope: dict, promoted: bool,
                      reason: str) -> int:
    """Record a fitted advisor model (OmniPilot provenance); returns its version number."""
    with con.cursor() as cur:
        version = int(_run(cur, "SELECT nextval('model_version_seq')").fetchone()[0])
        _run(cur, "INSERT INTO model_versions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
             [version, _now(), data_version(con), rows, json.dumps(metrics),
              json.dumps(envelope), promoted, reason])
    return version


def model_versions(con) -> pd.DataFrame:
    """The advisor's model versions, newest first (metrics / envelope as JSON text)."""
    with con.cursor() as cur:
        return _run(cur, "SELECT * FROM model_versions ORDER BY version DESC").df()
