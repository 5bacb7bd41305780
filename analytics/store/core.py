"""Store connections and their discipline, migrations, and the one statement runner.

Owns :func:`connect` (short-lived connections, read-only for readers, a locked file retried with
back-off and :class:`StoreBusy` naming its holder), :func:`migrate`, :func:`_run` (a failing
statement raises :class:`StoreError` with its SQL), :func:`transaction`, the data version and the
store's errors. See :mod:`analytics.store` for the whole picture.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from analytics.schema import COLUMNS
from analytics.store.migrations import MIGRATIONS, SCHEMA_VERSION

DATA_TABLES = tuple(COLUMNS)


class StoreError(RuntimeError):
    """A statement failed; carries the SQL that failed (``sql``), and ``public``: what a
    browser user may be told (no server path, process or SQL; the full message is for the
    operator's CLI and the server log)."""

    public = "the store could not complete this; the server log has the details"

    def __init__(self, message: str, sql: str | None = None, public: str | None = None):
        self.sql = sql
        if public is not None:
            self.public = public
        super().__init__(message + (f"\n-- failing SQL:\n{sql.strip()}" if sql else ""))


class StoreRefused(StoreError):
    """The file is not one this headroom may open as asked (not a headroom store, a newer or an
    older schema for a reading command, a directory): nothing was written to it; the message
    says what it is and what to do (the CLI exits 2)."""

    public = ("the store this server is set to use cannot be opened: the operator must point "
              "HEADROOM_DB at a headroom store (the server log names the file and why)")


class NotAStore(StoreRefused):
    """An existing file that is not a headroom store (another program's DuckDB database, or
    not a DuckDB file at all): refused by name, never migrated."""


class StoreOutdated(StoreRefused):
    """A headroom store at an older schema opened by a reading command: reading commands
    never migrate (run ``headroom migrate``, or any writing command)."""


class StoreFull(StoreError):
    """The disk that holds the store is full: the change was rolled back."""


#: How the operating system says a disk is full (errno ENOSPC), as DuckDB passes it on.
_DISK_FULL = "No space left on device"


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
    from analytics.config import env_number

    return env_number("HEADROOM_STORE_WAIT_S", 20)


def connect(path: str | Path, read_only: bool = False, wait_s: float | None = None,
            migrate_old: bool = False) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the store at ``path`` with its schema up to date.

    An existing file is first identified on a read-only connection (:func:`identify`): another
    program's DuckDB database, a file that is not DuckDB's, or a store of a newer headroom is
    refused by name and left untouched (issue 34: ``--db other.duckdb datasets`` once added 17
    tables to a foreign file and altered its ``datasets`` table).

    Parameters
    ----------
    path : DuckDB file, or ``":memory:"``
    read_only : open for reading only, so other readers (the app, other CLI commands) can hold
        it at the same time. A missing file (or an empty DuckDB database) is first created as a
        new store by a short read-write open; an outdated store is migrated only with
        ``migrate_old`` (reading commands never migrate).
    wait_s : how long to retry while another connection holds a conflicting lock (default
        :func:`default_wait_s`)
    migrate_old : with ``read_only``, migrate an older headroom store first (the app's server,
        which also writes); without it a reading open of one raises :class:`StoreOutdated`.
        Writing opens always migrate a headroom store.

    Raises
    ------
    StoreBusy
        The store stayed locked for ``wait_s`` seconds; says by which process.
    NotAStore
        The file exists and is not a headroom store (nothing written to it).
    StoreOutdated
        A reading open of an older store without ``migrate_old``.
    StoreRefused
        A store of a newer headroom, or a path that is not a regular file.
    StoreError
        The file cannot be opened for another reason (damaged: the message says so).
    """
    path = Path(path)
    wait_s = default_wait_s() if wait_s is None else wait_s
    if str(path) == ":memory:":
        con = duckdb.connect(":memory:")
        migrate(con)
        return con
    _check_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if read_only:
        con = _current_read_only(path, wait_s, migrate_old)
        if con is not None:
            return con
        with _open(path, False, wait_s) as con:
            _refuse_unless_ours(con, path, True)
            migrate(con)
    else:
        _identified(path, wait_s)
    con = _open(path, read_only, wait_s)
    if not read_only:
        try:
            _refuse_unless_ours(con, path, True)
        except BaseException:
            con.close()
            raise
        migrate(con)
    return con


#: Store files this process has identified as headroom's (or empty), as (device, inode): a file
#: keeps what it is while it is written; another file at the path has another inode.
_ours: set[tuple[int, int]] = set()


def _identified(path: Path, wait_s: float) -> None:
    """Before a read-write open of an existing file, identify it on a read-only connection (once
    per file and process): a read-write open of another program's database replays its pending
    write-ahead log into it (the break-it review), which a read-only open does not."""
    try:
        st = path.stat()
    except OSError:
        return  # a new store
    if (st.st_dev, st.st_ino) in _ours:
        return
    with _open(path, True, wait_s) as con:
        _refuse_unless_ours(con, path, True)
    _ours.add((st.st_dev, st.st_ino))


def migrate_file(path: str | Path, wait_s: float | None = None) -> tuple[int, int]:
    """Bring the headroom store at ``path`` (or a new one) to :data:`SCHEMA_VERSION` in one
    transaction; returns ``(version before, version now)`` (0 before: a new store). Raises as
    :func:`connect` (a foreign file is refused, untouched)."""
    path = Path(path)
    wait_s = default_wait_s() if wait_s is None else wait_s
    _check_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _identified(path, wait_s)
    with _open(path, False, wait_s) as con:
        before = _refuse_unless_ours(con, path, True)
        return before, migrate(con)


#: Tables every headroom store holds since schema 1 (with ``meta``'s ``data_version`` row):
#: what tells a headroom store from another program's DuckDB database.
MARKER_TABLES = ("schema_version", "meta", "datasets")


#: Every object a user can make in a DuckDB database, as (kind, name) rows: tables and views in
#: any schema, sequences, macros, types, schemas other than ``main``.
_OBJECTS = """
    SELECT 'table', schema_name || '.' || table_name FROM duckdb_tables()
     WHERE NOT internal AND database_name = current_database()
    UNION ALL SELECT 'view', schema_name || '.' || view_name FROM duckdb_views()
     WHERE NOT internal AND database_name = current_database()
    UNION ALL SELECT 'sequence', schema_name || '.' || sequence_name FROM duckdb_sequences()
     WHERE database_name = current_database()
    UNION ALL SELECT 'macro', schema_name || '.' || function_name FROM duckdb_functions()
     WHERE NOT internal AND database_name = current_database()
    UNION ALL SELECT 'type', schema_name || '.' || type_name FROM duckdb_types()
     WHERE NOT internal AND database_name = current_database()
    UNION ALL SELECT 'schema', schema_name FROM duckdb_schemas()
     WHERE NOT internal AND database_name = current_database() AND schema_name <> 'main'
    ORDER BY 2"""


#: How many of :data:`MARKER_TABLES` the database holds in ``main``.
_MARKERS = """
    SELECT count(*) FROM duckdb_tables()
     WHERE NOT internal AND database_name = current_database() AND schema_name = 'main'
       AND list_contains(?, table_name)"""


def identify(con) -> tuple[str, object]:
    """What the database on ``con`` is: ``("headroom", schema version)``, ``("empty", 0)``
    (no object at all: a new store may be made in it), or ``("foreign", [object names])`` (a
    table, view, sequence, macro, type or schema of another program, in any schema)."""
    with con.cursor() as cur:
        # headroom's own marker tables first (~1 ms); the full object list (~20 ms: DuckDB
        # enumerates every built-in function to find the macros) only for any other file
        markers = _run(cur, _MARKERS, [list(MARKER_TABLES)]).fetchone()[0]
        if markers == len(MARKER_TABLES):
            try:
                marked = _run(cur, "SELECT count(*) FROM meta WHERE key = 'data_version'"
                              ).fetchone()[0]
                version = _run(cur, "SELECT max(version) FROM schema_version").fetchone()[0]
            except StoreError:
                marked = 0
            if marked:
                return "headroom", int(version or 0)
        objects = _run(cur, _OBJECTS).fetchall()
        if not objects:
            return "empty", 0
        return "foreign", [name.removeprefix("main.") for _, name in objects]


def _refuse_unless_ours(con, path: Path, may_migrate: bool) -> int:
    """The schema version of the headroom store on ``con`` (0: empty, to be made); raise
    :class:`NotAStore` for another database, :class:`StoreRefused` for a newer headroom's,
    :class:`StoreOutdated` for an older one unless ``may_migrate``."""
    kind, found = identify(con)
    if kind == "foreign":
        shown = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
        raise NotAStore(f"{path} is a DuckDB database but not a headroom store (it holds "
                        f"{shown}, not headroom's {', '.join(MARKER_TABLES)}); headroom left it "
                        "untouched. Point --db / HEADROOM_DB at a headroom store, or at a new "
                        "file name to start one.")
    if found > SCHEMA_VERSION:
        raise StoreRefused(f"{path} is a headroom store at schema {found}, newer than this "
                           f"headroom's {SCHEMA_VERSION}: upgrade headroom to read it.")
    if kind == "headroom" and found < SCHEMA_VERSION and not may_migrate:
        raise StoreOutdated(f"{path} is a headroom store at schema {found}; this headroom "
                            f"reads schema {SCHEMA_VERSION}, and a reading command never "
                            "migrates. Run `headroom migrate` (one transaction; keep a copy of "
                            "the file if an older headroom must still read it), then try again.")
    return found


def _check_path(path: Path) -> None:
    """Refuse a store path (or its write-ahead log) that exists and is not a regular file (a
    directory, a FIFO: opening one hung; a device), naming what it is. An empty file (0 bytes:
    what a failed creation on a full disk leaves) is removed, to be made again as a new
    store."""
    from analytics.config import not_a_file

    for where in (path, path.with_name(path.name + ".wal")):
        why = not_a_file(where)
        if why is not None and why != "no such file":
            raise StoreRefused(f"cannot use {where} as the store: it {why}. Point --db / "
                               "HEADROOM_DB at a DuckDB file (a new name starts a new store).")
    try:
        if path.stat().st_size == 0 and not path.with_name(path.name + ".wal").exists():
            path.unlink()
    except OSError:
        pass


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


def _current_read_only(path: Path, wait_s: float, migrate_old: bool):
    """A read-only connection to ``path`` when it is a headroom store at
    :data:`SCHEMA_VERSION`, identified on that same connection (one open, not two: a DuckDB
    open costs ~20 ms of CPU); None for a missing file, an empty database or (``migrate_old``)
    an older store, which the caller makes or migrates. Raises as :func:`_refuse_unless_ours`
    for any other file."""
    try:
        st = path.stat()
    except OSError:
        return None
    con = _open(path, True, wait_s)
    key = (st.st_dev, st.st_ino, st.st_ctime_ns)
    if key in _current_files:
        return con
    try:
        got = _refuse_unless_ours(con, path, migrate_old)
    except BaseException:
        con.close()
        raise
    if got == SCHEMA_VERSION:
        _current_files.add(key)
        return con
    con.close()
    return None


#: Every store connection's DuckDB settings (one set: DuckDB refuses a second connection to a
#: file with other ones): no extension is installed or loaded on the fly (a SQLite file given as
#: the store made DuckDB fetch ``sqlite_scanner`` over the network; the ones headroom uses,
#: ICU, JSON and Parquet, are built in).
_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def memory_mb() -> int:
    """The most memory (MB) DuckDB may use for a store this process opens:
    ``$HEADROOM_DUCKDB_MEMORY_MB``, default 512 (0: DuckDB's own default, 80 % of RAM). Beyond
    it DuckDB spills to the store's ``.tmp`` folder: the summary of a 45 M-row dataset took the
    app's server 1.8 GB above idle without it."""
    from analytics.config import env_number

    return int(env_number("HEADROOM_DUCKDB_MEMORY_MB", 512))


def _open(path: Path, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect`` retried with back-off (50 ms doubling to 1 s) while locked; the
    database's memory bounded at :func:`memory_mb`."""
    deadline, delay = time.monotonic() + wait_s, 0.05
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only, config=_CONFIG)
            # times are naive UTC everywhere: a zoned value (an attached Parquet file's) is
            # never read in the machine's own zone
            con.execute("SET GLOBAL TimeZone = 'UTC'")  # every cursor of it too
            if memory_mb() > 0:
                con.execute(f"SET memory_limit = '{memory_mb()}MB'")
            return con
        except duckdb.Error as exc:
            message = str(exc)
            if not any(m in message for m in _LOCK_MARKERS):
                raise StoreRefused(_unopenable(path, message)) from exc
            if time.monotonic() + delay > deadline:
                want = "read" if read_only else "write"
                raise StoreBusy(_busy_message(path, message, wait_s, read_only), public=(
                    f"the store is busy: another program (a headroom command or another "
                    f"server) kept it locked for the {wait_s:g} s this page waited to {want} "
                    "it. Wait for it to finish, then try again.")) from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _unopenable(path: Path, duckdb_message: str) -> str:
    """What to tell a user whose store file DuckDB cannot open (not a DuckDB file, damaged,
    unreadable), with DuckDB's own first line for the details."""
    first = duckdb_message.strip().splitlines()[0][:300] if duckdb_message.strip() else ""
    if "not a valid DuckDB database file" in duckdb_message or "not a DuckDB" in duckdb_message:
        what = "is not a DuckDB database file (another program's file, or a damaged store)"
    elif "Permission denied" in duckdb_message:
        what = "cannot be read or written by this user"
    elif "Corrupt" in duckdb_message or "checksum" in duckdb_message.lower():
        what = "is damaged"
    else:
        what = "cannot be opened"
    return (f"the store {path} {what}: headroom left it untouched. Restore it from a copy, or "
            f"point --db / HEADROOM_DB at another file (a new name starts a new store). "
            f"DuckDB said: {first}")


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
        if _DISK_FULL in str(exc):
            message = (f"the disk that holds the store is full ({_DISK_FULL}): nothing of this "
                       "change was kept. Free space there (or point --db / HEADROOM_DB at a "
                       "store on a disk with room) and try again.")
            raise StoreFull(message, public=message) from exc
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
        try:
            _run(cur, "ROLLBACK")
        except StoreError:  # DuckDB ended it already (a failed COMMIT, a full disk): the
            pass            # first error is the one to report, not "no transaction is active"
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


