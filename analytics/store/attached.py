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

import hashlib
import json
import os

from analytics.schema import note_dict
from analytics.store.attached_check import Checked
from analytics.store.attached_files import (
    AttachedChanged,
    AttachRefused,
    _remote_ready,
    is_remote,
    list_files,
    relation,
)
from analytics.store.core import (
    NameTaken,
    UnknownDataset,
    _bump_data_version,
    _now,
    _run,
    transaction,
)


def record(cur, dataset_id: int, pattern: str, form: str, files: list[tuple],
           columns: dict[str, str], csv_header: list[str] | None = None) -> None:
    """Keep (or replace) what was validated: pattern, form, files with size and time,
    columns (and a CSV's header, in its order)."""
    _run(cur, "DELETE FROM attached WHERE dataset_id = ?", [dataset_id])
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
