"""Store connections and their discipline, migrations, and the one statement runner.

Owns :func:`connect` (short-lived connections, read-only for readers, a locked file retried with
back-off and :class:`StoreBusy` naming its holder), :func:`migrate`, :func:`_run` (a failing
statement raises :class:`StoreError` with its SQL), :func:`transaction`, the data version and the
store's errors. See :mod:`analytics.store` for the whole picture.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from analytics.schema import (
    COLUMNS,
    MIGRATIONS,
    SCHEMA_VERSION,  # noqa: F401 - callers read store.SCHEMA_VERSION
    )

DATA_TABLES = tuple(COLUMNS)


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


#: Store files this process has seen at :data:`SCHEMA_VERSION`, as (device, inode, ctime): a
#: schema only moves forward, so a file found current stays current until it is replaced or
#: written (a new ctime: checked again).
_current_files: set[tuple[int, int, int]] = set()


def file_stamp(path: str | Path) -> tuple:
    """``(inode, bytes, mtime ns)`` of the store file and of its write-ahead log (None where
    there is none): every committed write moves one of them (DuckDB appends a commit to the
    ``.wal`` file, a checkpoint rewrites the store); reads move neither. A cache key that costs
    a ``stat``, not a connection."""
    path = Path(path)
    out = []
    for p in (path, path.with_name(path.name + ".wal")):
        try:
            st = p.stat()
        except OSError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _is_current(path: Path, wait_s: float) -> bool:
    """Whether ``path`` exists and its schema is at :data:`SCHEMA_VERSION` (read-only check;
    a file already found current by this process is not opened again)."""
    try:
        st = path.stat()
    except OSError:
        return False
    key = (st.st_dev, st.st_ino, st.st_ctime_ns)
    if key in _current_files:
        return True
    with _open(path, True, wait_s) as con:
        try:
            got = con.execute("SELECT max(version) FROM schema_version").fetchall()[0][0]
        except duckdb.CatalogException:
            return False
    if got == SCHEMA_VERSION:
        _current_files.add(key)
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
    """Apply pending migrations in one transaction (all of them or none: a new store is created
    with one commit, not one per version); return the schema version now in force."""
    with con.cursor() as cur:
        _run(cur, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER, applied_at TIMESTAMP)")
        current = _run(cur, "SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]
        pending = sorted(v for v in MIGRATIONS if v > current)
        if not pending:
            return current
        with transaction(cur):
            for version in pending:
                for sql in MIGRATIONS[version]:
                    _run(cur, sql)
                _run(cur, "INSERT INTO schema_version VALUES (?, ?)", [version, _now()])
    return pending[-1]


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


def db_path(con) -> Path | None:
    """The file of the store ``con`` is connected to, or None for an in-memory store (where
    caches beside the store, e.g. :mod:`analytics.services.envelope_cache`, are kept)."""
    with con.cursor() as cur:
        row = _run(cur, "SELECT path FROM duckdb_databases() "
                        "WHERE database_name = current_database()").fetchone()
    return Path(row[0]) if row and row[0] else None


def data_version(con) -> int:
    """A number that changes whenever any dataset is added or removed (cache key)."""
    with con.cursor() as cur:
        return int(_run(cur, "SELECT value FROM meta WHERE key = 'data_version'").fetchone()[0])


