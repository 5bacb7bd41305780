"""Writes to the store: the ingest transaction (duplicates, names, site aliases), delete,
appended telemetry rows and advisor model versions."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from analytics.config import check_dataset_name
from analytics.schema import (
    COLUMNS,
    Parsed,
    conform,
    narrow_for,
    note_dict,
    stored_table,
    stored_tables,
)
from analytics.store import appends
from analytics.store.core import (
    NameTaken,
    StoreError,
    UnknownDataset,
    _bump_data_version,
    _now,
    _run,
    data_version,
    memory_mb,
    transaction,
)
from analytics.store.reads import SITE_TABLES, dataset
from analytics.store.summaries import provenance_json

if TYPE_CHECKING:  # polars loads with the parsers, not for reading the store
    import polars as pl


@dataclass(frozen=True)
class IngestItem:
    """One parsed file to write: rows, the dataset name, and the sha256 of its bytes.

    ``alternatives``: None keeps ``name`` strict (a name held by other content raises
    :class:`NameTaken`, the CLI's ``--name`` semantics); a tuple lets :func:`ingest` pick a
    free name instead: each alternative in turn, then ``name-2``, ``name-3`` ... (browser
    uploads, whose users cannot rename a file mid-upload). ``append_to``: the rows join that
    existing dataset instead (:mod:`analytics.store.appends`; ``name`` is then ignored).
    """

    parsed: Parsed
    name: str
    sha256: str
    synthetic: bool = False
    alternatives: tuple[str, ...] | None = None
    append_to: str | None = None


def ingest(con, items: list[IngestItem]) -> list[dict]:
    """Write parsed files as new datasets, all in one transaction.

    Returns
    -------
    list of dict, one per item: ``{"file", "dataset", "format", "rows", "status"}`` with status
    ``"ingested"``, ``"appended"`` (an item with ``append_to``: its new rows, and ``dropped``,
    the rows already stored, :func:`analytics.store.appends.append`) or ``"duplicate"`` (same
    bytes already stored in any dataset: no rows written). A duplicate
    site file whose rows name another site than the stored copy (SustainDC's ``CISO_...`` and
    ``CA_...``) registers that code as an alias of the stored site (``site_alias``:
    ``{"alias", "site"}``; :func:`site_catalog`, :func:`site_hourly`).

    Raises
    ------
    NameTaken
        A dataset with that name holds other bytes and the item allows no other name
        (``alternatives`` None). Nothing of the batch is written.
    ValueError
        A name outside the dataset-name character set (``config.DATASET_NAME``), or an
        appended file its dataset cannot take (``appends.AppendRefused``). Nothing of the batch
        is written.
    UnknownDataset
        ``append_to`` names no dataset. Nothing of the batch is written.
    StoreError
        A statement failed. Nothing of the batch is written.
    """
    with _stream_memory(con, any(it.parsed.stream is not None for it in items)) as status, \
            con.cursor() as cur, transaction(cur):
        results = write_items(cur, items)
    if "checkpoint" in status:  # committed (in the write-ahead log), not yet in the store file
        for r in results:
            r.setdefault("warnings", []).append(note_dict(
                "the disk that holds the store filled up after these rows were committed: they "
                "are kept in the store's write-ahead log (.wal) and folded into the store when "
                "there is room again; free space there"))
    return results


def write_items(cur, items: list[IngestItem]) -> list[dict]:
    """:func:`ingest`'s writes on ``cur``, inside the caller's transaction (the live road
    appends its bins with the bins' own record: :func:`analytics.store.live.save_live_bins`);
    moves the data version when a row or a site alias was written. Returns and raises as
    :func:`ingest`."""
    results, changed, seen_names = [], False, set()
    for item in items:
        p = item.parsed
        dup = _run(cur, "SELECT d.name, d.dataset_id FROM dataset_files f JOIN datasets d "
                        "USING (dataset_id) WHERE f.sha256 = $1 UNION ALL SELECT name, "
                        "dataset_id FROM datasets WHERE sha256 = $1 LIMIT 1",
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
        if item.append_to is not None:
            results.append(appends.append(cur, item.append_to, p, item.sha256, _fill))
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
    if changed or any(r["status"] in ("ingested", "appended") for r in results):
        _bump_data_version(cur)
    return results


#: DuckDB memory (its buffer pool) the store may hold while a streamed file is written: the
#: written blocks past it are evicted (they are in the store file already) or spilled to the
#: store's temporary folder. Without it the buffer pool kept them all, and the checkpoint at
#: close read them again: peak RSS of ``headroom ingest`` grew with the file (CLI: 841 MiB at
#: 20 M BurstGPT rows, 430 MiB with it; 443 and 386 MiB at 5 M; ``bench/bench_ingest.py``,
#: issue 15).
STREAM_MEMORY = "256MB"


@contextlib.contextmanager
def _stream_memory(con, streamed: bool):
    """While a batch with a streamed item is written: the store's ``memory_limit`` at
    :data:`STREAM_MEMORY`, and a ``CHECKPOINT`` after the commit (under that limit, so that
    closing the store has nothing left to write); the caller's limit is restored afterwards.
    Does nothing for a batch without a streamed item, or in an in-memory store. Yields a dict
    where ``"checkpoint"`` is set to DuckDB's message when the committed rows could not be
    folded into the store file (a full disk: they stay in its write-ahead log)."""
    status: dict = {}
    with con.cursor() as cur:  # settings are the database's; the caller's results stay
        if not streamed or _one(cur, "SELECT path FROM duckdb_databases() "
                                     "WHERE database_name = current_database()") is None:
            yield status
            return
        old = _one(cur, "SELECT current_setting('memory_limit')")
        _one(cur, f"SET memory_limit = '{STREAM_MEMORY}'")
        try:
            yield status
            try:
                _one(cur, "CHECKPOINT")
            except Exception as exc:  # noqa: BLE001 - another open transaction: close writes it
                if _DISK_FULL_TEXT in str(exc):
                    status["checkpoint"] = str(exc).splitlines()[-1][:300]
        finally:  # RESET when it was DuckDB's default, the store's own bound when it was that
            with contextlib.suppress(Exception):  # (SET of the rounded text drifts down); a
                _one(cur, "RESET memory_limit")   # database a failed checkpoint invalidated
                for value in (f"{memory_mb()}MB", old):  # is closed by the caller
                    if _one(cur, "SELECT current_setting('memory_limit')") == old:
                        break
                    _one(cur, f"SET memory_limit = '{value}'")


#: What stops a direct insert at a row the narrow table cannot keep.
_NOT_NARROW = "headroom: not a narrow row"

#: How DuckDB reports a full disk (errno ENOSPC).
_DISK_FULL_TEXT = "No space left on device"


def _one(cur, sql: str):
    """The first value of ``sql``'s result (None without rows), the result read to its end."""
    rows = cur.execute(sql).fetchall()
    return rows[0][0] if rows and rows[0] else None


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
    dataset_id = _run(cur, "SELECT nextval('dataset_id_seq')").fetchall()[0][0]
    ts_col = "ts" if "ts" in frame.columns else ("submit_ts" if "submit_ts" in frame.columns
                                                  else None)
    if p.stream is not None:  # a large file read now, batch by batch, in this transaction
        p, rows, ts_min, ts_max = _insert_stream(cur, p, dataset_id)
    else:
        rows = frame.height
        ts_min = frame[ts_col].min() if ts_col and frame.height else None
        ts_max = frame[ts_col].max() if ts_col and frame.height else None
        _insert_frame(cur, p.table, frame, dataset_id)
    _run(
        cur,
        "INSERT INTO datasets (dataset_id, name, kind, format, source, sha256, rows, ts_min, "
        "ts_max, resolution_s, ingested_at, synthetic, warnings, source_tz) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [dataset_id, item.name, p.table, p.format, p.source, item.sha256, rows,
         ts_min, ts_max, p.resolution_s, _now(), item.synthetic, "\n".join(p.warnings),
         p.source_tz],
    )
    _run(cur, "INSERT INTO dataset_files (dataset_id, sha256, file, format, rows, dropped, "
              "ts_min, ts_max, added_at, sources, assumptions) "
              "VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?)",
         [dataset_id, item.sha256, p.source, p.format, rows, ts_min, ts_max, _now(),
          *provenance_json(p)])
    return {"file": p.source, "dataset": item.name, "format": p.format, "rows": rows,
            "status": "ingested", "table": p.table, "source_tz": p.source_tz,
            "ts_min": ts_min.isoformat() if ts_min is not None else None,
            "ts_max": ts_max.isoformat() if ts_max is not None else None,
            "sources": dict(p.sources), "assumptions": list(p.assumptions),
            "warnings": [note_dict(w) for w in p.warnings]}



def _insert_stream(cur, p: Parsed, dataset_id: int) -> tuple:
    """Write a streamed file's rows (``Parsed.stream``, an Arrow stream read batch by batch)
    with one INSERT; returns ``(parsed with the stream's warnings, rows, ts_min, ts_max)``.

    Raises
    ------
    StreamRefused
        The stream met a value for the checked reader (the caller's transaction rolls back).
    StoreError
        The statement failed for another reason.
    """
    stream = p.stream
    direct = stream.direct_sql(cur)
    if direct is not None:
        return _insert_direct(cur, p, dataset_id, direct)
    reader = stream.reader()
    cols = ", ".join(stream.columns)  # the table's other columns: their default, NULL
    cur.register("incoming_stream", reader)
    try:
        _run(cur, f"INSERT INTO {stored_table(p.table)} (dataset_id, {cols}) "
                  f"SELECT ? AS dataset_id, {cols} FROM incoming_stream", [dataset_id])
    except Exception:
        if stream.refused is not None:
            raise stream.refused from None
        raise
    finally:
        with contextlib.suppress(Exception):  # an aborted transaction: rolled back by the caller
            cur.unregister("incoming_stream")
    done = replace(p, warnings=(*p.warnings, *stream.warnings()), stream=None)
    return done, stream.rows, stream.ts_min, stream.ts_max


def _insert_direct(cur, p: Parsed, dataset_id: int, sql: str) -> tuple:
    """:func:`_insert_stream` by one ``INSERT ... SELECT`` of the stream's
    :meth:`~analytics.ingest.fastcsv.Streamed.direct_sql` (DuckDB reads the file, no row
    passes through Python), then the stored rows' checks, count and time span
    (:meth:`~analytics.ingest.fastcsv.Streamed.direct_check`).

    Raises
    ------
    StreamRefused
        A row for the checked reader or for the batch checks (``batches``); the caller's
        transaction rolls back.
    """
    stream = p.stream
    table, kept, where = stored_table(p.table), stream.columns, "true"
    narrow = narrow_for(p.table, stream.columns)
    if narrow is not None:  # the rows fill only the narrow table's columns and its constants
        table, kept = narrow[0], [c for c in narrow[1] if c in stream.columns]
        where = " AND ".join([f"{c} IS NOT DISTINCT FROM {v}" for c, v in narrow[2].items()]
                             or ["true"])
    cols = ", ".join(kept)
    _run(cur, "SET enable_progress_bar = false")  # this cursor's session only, as the batches'
    try:  # a constant the narrow table would not keep stops it (folded away by DuckDB)
        _run(cur, f"INSERT INTO {table} (dataset_id, {cols}) "
                  f"SELECT ? AS dataset_id, {cols} FROM ({sql}) AS direct WHERE CASE WHEN "
                  f"{where} THEN true ELSE error('{_NOT_NARROW}') END",
             [dataset_id, str(stream.path)])
    except StoreError as exc:  # a row the narrow table cannot keep (a failed request): the
        # batches write the wide table; anything else goes to the checked reader
        said = str(exc).split("\n-- failing SQL:", 1)[0]  # DuckDB's words, not the SQL's
        raise stream.direct_refused(exc, batches=_NOT_NARROW in said) from None
    rows, ts_min, ts_max = stream.direct_check(cur, dataset_id, table, kept)
    return replace(p, warnings=(*p.warnings, *stream.warnings()), stream=None), rows, ts_min, ts_max


class _ArrowStream:
    """A polars frame seen by DuckDB through the Arrow PyCapsule stream interface only, so that
    writing it does not import pyarrow (and numpy): ``frame.to_arrow()`` would, which is a third
    of a small file's ingest CPU (issue 15). Each scan asks for a fresh stream."""

    def __init__(self, frame: pl.DataFrame):
        self.frame = frame

    def __arrow_c_stream__(self, requested_schema=None):
        return self.frame.__arrow_c_stream__(requested_schema)


def _fill(cur, target: str, frame: pl.DataFrame) -> None:
    """Copy a conformed frame's columns into the (temporary) table ``target``, in order."""
    cols = ", ".join(frame.columns)
    cur.register("incoming", _ArrowStream(frame))
    try:
        _run(cur, f"INSERT INTO {target} ({cols}) SELECT {cols} FROM incoming")
    finally:
        cur.unregister("incoming")


def _insert_frame(cur, table: str, frame: pl.DataFrame, dataset_id: int) -> None:
    """Append a conformed frame's rows to ``table`` under ``dataset_id``."""
    cols = ", ".join(COLUMNS[table])
    cur.register("incoming", _ArrowStream(frame))
    try:
        _run(cur, f"INSERT INTO {stored_table(table)} (dataset_id, {cols}) "
                  f"SELECT ? AS dataset_id, {cols} FROM incoming", [dataset_id])
    finally:
        cur.unregister("incoming")


def delete_dataset(con, name: str) -> None:
    """Remove a dataset and its rows (one transaction; an attached dataset's files stay where
    they are). Raises UnknownDataset."""
    with con.cursor() as cur, transaction(cur):
        row = _run(cur, "SELECT dataset_id, kind FROM datasets WHERE name = ?", [name]).fetchone()
        if row is None:
            raise UnknownDataset(name)
        for table in stored_tables(row[1]):
            _run(cur, f"DELETE FROM {table} WHERE dataset_id = ?", [row[0]])
        _run(cur, "DELETE FROM site_aliases WHERE dataset_id = ?", [row[0]])
        _run(cur, "DELETE FROM dataset_files WHERE dataset_id = ?", [row[0]])
        _run(cur, "DELETE FROM attached WHERE dataset_id = ?", [row[0]])  # never its files
        _run(cur, "DELETE FROM datasets WHERE dataset_id = ?", [row[0]])
        _bump_data_version(cur)



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



def add_model_version(con, rows: int, metrics: dict, envelope: dict, promoted: bool,
                      reason: str) -> int:
    """Record a fitted advisor model (OmniPilot provenance); returns its version number."""
    with con.cursor() as cur:
        version = int(_run(cur, "SELECT nextval('model_version_seq')").fetchone()[0])
        _run(cur, "INSERT INTO model_versions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
             [version, _now(), data_version(con), rows, json.dumps(metrics),
              json.dumps(envelope), promoted, reason])
    return version


