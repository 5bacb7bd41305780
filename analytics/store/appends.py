"""Datasets that grow: a parsed file appended to a stored dataset inside the ingest transaction
(issue 28, item 3).

The appended rows first go to a temporary table in file order. Rows equal in every canonical
column to rows already stored for the dataset (within the appended rows' time span) are dropped
*as a multiset*: a row that appears twice in the store and three times in the file is dropped
twice and kept once, so an overlap between two log drops is removed while two real requests
that look alike are both kept. In a keyed table (one row per site and hour, per GPU and sample,
per job: :data:`KEYS`) a remaining row whose key is stored with other values is refused, naming
the file's data row and the key. The rest is inserted; the ledger's row count and time span
follow, the file is recorded in ``dataset_files`` and the data version moves, so every cache
keyed on it (grids, envelopes) sees the new rows.
"""

from __future__ import annotations

from dataclasses import replace

from analytics.schema import COLUMNS, Parsed, conform, note_dict, stored_table
from analytics.store.core import StoreError, UnknownDataset, _now, _run
from analytics.store.summaries import provenance_json

#: The columns that identify one row of a keyed table (at most one stored row per key).
KEYS: dict[str, tuple[str, ...]] = {
    "demand_series": ("ts",), "carbon_intensity": ("site", "basis", "ts"),
    "weather": ("site", "ts"), "prices": ("site", "ts"),
    "telemetry": ("host", "gpu_id", "gpu_uuid", "ts"), "jobs": ("job_id",)}
#: The time column that bounds the overlap of an appended file with the stored rows.
TIME_COLUMN = {"jobs": "submit_ts", "bench_runs": None, "reference_cdf": None}
#: Tables whose datasets take appended files (a reference CDF or a benchmark grid is one file).
APPENDABLE = ("requests", "demand_series", "carbon_intensity", "weather", "prices", "telemetry",
              "jobs")


class AppendRefused(ValueError):
    """An appended file that cannot join its dataset (another table, a key stored with other
    values); nothing of the batch is written. ``file``, ``row`` (1-based data row of the file,
    or None) and ``column`` say where."""

    def __init__(self, file: str, message: str, row: int | None = None,
                 column: str | None = None):
        self.file, self.row, self.column = file, row, column
        super().__init__(f"{file}: {message}")


def _same(cols, a: str, b: str) -> str:
    return " AND ".join(f"{a}.{c} IS NOT DISTINCT FROM {b}.{c}" for c in cols)


def append(cur, name: str, p: Parsed, sha256: str, insert_frame) -> dict:
    """Append ``p``'s rows to dataset ``name`` on ``cur`` (inside the caller's transaction);
    returns the ingest report entry (status ``appended``; ``rows`` added, ``dropped``: rows
    already stored). ``insert_frame(cur, table, frame)`` fills a temporary table from a frame.

    Raises
    ------
    UnknownDataset
        No dataset ``name``.
    AppendRefused
        The dataset holds another table, takes no appended files, or a key of a keyed table is
        stored with other values.
    StoreError, StreamRefused
        A statement failed, or the streamed file met a value for the checked reader.
    """
    row = _run(cur, "SELECT dataset_id, kind, format FROM datasets WHERE name = ?",
               [name]).fetchone()
    if row is None:
        raise UnknownDataset(name)
    dataset_id, kind, fmt = int(row[0]), row[1], row[2]
    if fmt.startswith("attached_"):
        raise AppendRefused(p.source, f"dataset {name!r} is attached: its rows are its files. "
                                      "Put the file under its pattern and refresh it "
                                      f"(headroom attach --refresh {name})")
    if fmt == "live" and p.format != "live":
        raise AppendRefused(p.source, f"dataset {name!r} is the series of a live run: only "
                                      "the run appends to it (a row of yours could later "
                                      "conflict with a bin it closes); ingest the file as a "
                                      "dataset of its own")
    if kind != p.table:
        raise AppendRefused(p.source, f"dataset {name!r} holds {kind}; this file holds "
                                      f"{p.table}: append it to a {p.table} dataset, or ingest "
                                      "it as a new dataset")
    if kind not in APPENDABLE:
        raise AppendRefused(p.source, f"{kind} datasets take no appended files (one file is "
                                      "one grid); ingest it as a new dataset")
    cols = list(COLUMNS[kind])
    listed = ", ".join(cols)
    _run(cur, f"CREATE OR REPLACE TEMP TABLE __incoming AS SELECT {listed} FROM {kind} LIMIT 0")
    warnings = list(p.warnings)
    if p.stream is not None:
        p = _stream_into(cur, p, cols)
        warnings = list(p.warnings)
    else:
        insert_frame(cur, "__incoming", conform(p.frame, kind))
    ts = TIME_COLUMN.get(kind, "ts")
    window = ""
    if ts is not None:
        window = (f" AND {ts} BETWEEN (SELECT min({ts}) FROM __incoming) "
                  f"AND (SELECT max({ts}) FROM __incoming)")
    _run(cur, f"""CREATE OR REPLACE TEMP TABLE __keep AS
        WITH inc AS (SELECT row_number() OVER (ORDER BY rowid) AS __n, {listed},
                            row_number() OVER (PARTITION BY {listed} ORDER BY rowid) AS __k
                       FROM __incoming),
             old AS (SELECT {listed}, row_number() OVER (PARTITION BY {listed}) AS __k
                       FROM {kind} WHERE dataset_id = ?{window})
        SELECT inc.* FROM inc
         WHERE NOT EXISTS (SELECT 1 FROM old WHERE {_same(cols, 'old', 'inc')}
                                               AND old.__k = inc.__k)""", [dataset_id])
    span = f"min({ts}), max({ts})" if ts is not None else "NULL, NULL"
    incoming, added, lo, hi = _run(cur, f"SELECT (SELECT count(*) FROM __incoming), count(*), "
                                        f"{span} FROM __keep").fetchone()
    added = int(added)
    dropped = int(incoming) - added
    if kind in KEYS:
        _refuse_conflicts(cur, p.source, name, kind, dataset_id, p.lines)
    if "site" in cols:
        warnings.extend(_new_sites(cur, kind, name, dataset_id))
    _run(cur, f"INSERT INTO {stored_table(kind)} (dataset_id, {listed}) "
              f"SELECT ?, {listed} FROM __keep ORDER BY __n", [dataset_id])
    if dropped:
        warnings.append(f"{dropped:,} row(s) already stored in dataset {name!r} (the same "
                        "values within this file's time span) were dropped")
    if p.format != fmt:
        warnings.append(f"a {p.format} file appended to a {fmt} dataset")
    _run(cur, """UPDATE datasets SET rows = rows + ?,
                    ts_min = CASE WHEN ts_min IS NULL OR ? < ts_min THEN ? ELSE ts_min END,
                    ts_max = CASE WHEN ts_max IS NULL OR ? > ts_max THEN ? ELSE ts_max END,
                    warnings = concat_ws(chr(10), nullif(warnings, ''), ?)
                  WHERE dataset_id = ?""",
         [added, lo, lo, hi, hi, f"appended {p.source}: {added:,} rows", dataset_id])
    _run(cur, "INSERT INTO dataset_files (dataset_id, sha256, file, format, rows, dropped, "
              "ts_min, ts_max, added_at, sources, assumptions) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
         [dataset_id, sha256, p.source, p.format, added, dropped, lo, hi, _now(),
          *provenance_json(p)])
    _run(cur, "DROP TABLE __incoming; DROP TABLE __keep")
    return {"file": p.source, "dataset": name, "format": p.format, "rows": added,
            "dropped": dropped, "status": "appended", "table": kind,
            "source_tz": p.source_tz,
            "sources": dict(p.sources), "assumptions": list(p.assumptions),
            "ts_min": lo.isoformat() if lo is not None else None,
            "ts_max": hi.isoformat() if hi is not None else None,
            "warnings": [note_dict(w) for w in warnings]}


def _stream_into(cur, p: Parsed, cols: list[str]) -> Parsed:
    """A streamed file's rows into ``__incoming`` batch by batch (never the direct insert:
    that one checks the stored rows of a whole dataset); its warnings added to ``p``."""
    stream = p.stream
    stream.direct = False
    reader = stream.reader()
    have = ", ".join(stream.columns)
    cur.register("incoming_stream", reader)
    try:
        _run(cur, f"INSERT INTO __incoming ({have}) SELECT {have} FROM incoming_stream")
    except StoreError:
        if stream.refused is not None:
            raise stream.refused from None
        raise
    finally:
        cur.unregister("incoming_stream")
    return replace(p, warnings=(*p.warnings, *stream.warnings()), stream=None)


def _new_sites(cur, kind: str, name: str, dataset_id: int) -> list[str]:
    """A warning when the appended rows name no site the dataset holds: they start another
    series (a site taken from the file's name, when the file does not say)."""
    new = [r[0] for r in _run(cur, "SELECT DISTINCT site FROM __keep ORDER BY 1").fetchall()]
    old = [r[0] for r in _run(cur, f"SELECT DISTINCT site FROM {kind} WHERE dataset_id = ? "
                                    "ORDER BY 1", [dataset_id]).fetchall()]
    if not new or not old or set(new) & set(old):
        return []
    return [f"the appended rows name site {', '.join(map(str, new))}, the rows of dataset "
            f"{name!r} site {', '.join(map(str, old))}: they are kept as another series (give "
            "the site, --site or the Site option, if it is the same one)"]


def _refuse_conflicts(cur, file: str, name: str, kind: str, dataset_id: int,
                      lines=None) -> None:
    """Raise :class:`AppendRefused` at the first kept row whose key is stored with other
    values (the exact duplicates are already gone), naming its line in the file as given
    (``lines``: :attr:`Parsed.lines`, the physical line of each incoming row) or, when the
    lines are unknown, its data row."""
    key = KEYS[kind]
    hit = _run(cur, f"""SELECT k.__n, {', '.join(f'k.{c}' for c in key)}
                          FROM __keep k JOIN {kind} s ON s.dataset_id = ?
                           AND {_same(key, 's', 'k')}
                         ORDER BY k.__n LIMIT 1""", [dataset_id]).fetchone()
    if hit is None:
        return
    where = ", ".join(f"{c} {v}" for c, v in zip(key, hit[1:], strict=True) if v is not None)
    at = (f"line {int(lines[int(hit[0]) - 1]):,}" if lines is not None
          and len(lines) >= int(hit[0]) else f"data row {int(hit[0]):,}")
    raise AppendRefused(file, f"{at} ({where}) is already stored in "
                              f"dataset {name!r} with other values: appending it would keep "
                              "two values for one key. Remove the overlap from the file, or "
                              "delete the dataset and ingest the files again",
                        row=int(hit[0]), column=key[-1])
