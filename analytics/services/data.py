"""Data service: the dataset ledger, ingest (one path for uploads, the CLI and the first-run
bootstrap), pull from the official sources, delete and export."""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from analytics import store, tempfiles
from analytics.config import ParseOptions, not_a_file, safe_dataset_name
from analytics.ingest import sources
from analytics.ingest.digest import copy_hashed
from analytics.lazy import lazy_module
from analytics.schema import COLUMNS
from analytics.services import held

#: Dataset kinds that hold LLM demand (the sidebar's dataset picker).
if TYPE_CHECKING:
    import pandas as pd

# the parsers (polars, numpy) load when a file is parsed, not for `headroom datasets`
ingest = lazy_module("analytics.ingest.files")

DEMAND_KINDS = ("requests", "demand_series")


def ledger(con) -> pd.DataFrame:
    """The ``datasets`` ledger, one row per dataset (name, kind, format, rows, ts_min, ts_max,
    resolution_s, synthetic, ...)."""
    return store.list_datasets(con)


def demand_order(con) -> list[str]:
    """Demand dataset names (requests and series), the best to start on first (issue 31 item
    5: the first-run default was the sparse, GPU-seconds-only LoRA trace, the longest span):
    dense before sparse (:func:`analytics.power.too_sparse` on the share of empty minutes,
    :func:`analytics.store.demand_minutes`; a daily series counts as sparse), token traces
    before GPU-seconds-only ones, then the longest span, then the ledger order."""
    from analytics.power.inputs import too_sparse

    ledger = store.ledger_records(con)
    demand = [r for r in ledger if r["kind"] in DEMAND_KINDS]
    if len(demand) < 2:
        return [r["name"] for r in demand]
    minutes = store.demand_minutes(con)
    empty = {n: 1.0 - a / s for n, a, s in zip(minutes["name"], minutes["active_min"],
                                               minutes["span_min"], strict=True) if s > 0}
    ids = {r["name"]: r["dataset_id"] for r in demand}

    def key(pos_r):
        pos, r = pos_r
        tokens = r["kind"] != "requests" or store.request_fields(
            con, int(ids[r["name"]]), ("tokens",))["tokens"]
        span = ((r["ts_max"] - r["ts_min"]).total_seconds()
                if r["ts_min"] is not None and r["ts_max"] is not None else 0.0)
        return (too_sparse(empty.get(r["name"], 1.0)), not tokens, -span, pos)

    return [r["name"] for _, r in sorted(enumerate(demand), key=key)]


def summary(con, name: str) -> dict:
    """What one dataset holds in its kind's terms (:func:`analytics.store.dataset_summary`):
    e.g. a jobs dataset's GPU-hours, GPUs per job and MIG-slice jobs; a telemetry dataset's
    GPUs as (host, index, UUID). Raises ``store.UnknownDataset``."""
    out = store.dataset_summary(con, name)
    return {k: float(v) if isinstance(v, Decimal) else v for k, v in out.items()}


def ledger_document(con) -> list[dict]:
    """The ``headroom datasets`` document (times ISO 8601 UTC, null when unknown; ``source_tz``
    the IANA zone local times were converted from, null when none was given)."""
    def iso(ts) -> str | None:
        return None if ts is None else ts.isoformat()

    return [{"name": r["name"], "kind": r["kind"], "format": r["format"], "rows": int(r["rows"]),
             "ts_min": iso(r["ts_min"]), "ts_max": iso(r["ts_max"]),
             "source_tz": r["source_tz"], "synthetic": bool(r["synthetic"])}
            for r in store.ledger_records(con)]


def sweep_ledger(con, analysis: str | None = None) -> list[dict]:
    """The sweep points kept in the store (``sweep_runs``, issue 17), one record per
    (analysis, where it ran, code version, inputs), newest first: ``tasks``, ``first_started``
    / ``last_finished`` (ISO 8601 UTC), ``cpu_s`` / ``wall_s`` (sums over its tasks, s),
    ``max_wall_s`` (longest task, s), ``ran_on`` (``local``, ``serial`` or the Dask scheduler),
    12-character prefixes of the code version and inputs sha256."""
    frame = store.sweep_runs(con, analysis)
    out = []
    for r in frame.to_dict("records"):
        r["first_started"] = r["first_started"].isoformat()
        r["last_finished"] = r["last_finished"].isoformat()
        r["tasks"] = int(r["tasks"])
        r.update({k: round(float(r[k]), 3) for k in ("cpu_s", "wall_s", "max_wall_s")})
        out.append(r)
    return out


def sweep_view(con, analysis: str, code_version: str, inputs_sha256: str) -> dict:
    """One stored sweep (a :func:`sweep_ledger` record) as the Sweeps page and ``headroom
    sweeps`` show it: ``points`` (one record per task: its parameters and the numbers of its
    result, flattened; ``seed``, ``cpu_s``, ``ran_on``) and, for the power simulator's sweep
    (``power.sweep_point``), ``table`` (one row per cell with 95 % bands,
    :func:`analytics.power.sweep_points.table_of`), else None. Raises KeyError when no task of
    that sweep is stored."""
    import pandas as pd

    stored = store.sweep_points(con, analysis, code_version, inputs_sha256)
    if not stored:
        raise KeyError(f"no stored sweep {analysis} {code_version} {inputs_sha256}")
    points = pd.DataFrame([{**_scalars(p["params"]), "seed": p["seed"],
                            **_scalars(p["result"], "result."), "cpu_s": p["cpu_s"],
                            "ran_on": p["ran_on"]} for p in stored])
    table = None
    if analysis == "power.sweep_point":
        from analytics.power import sweep_points

        try:
            table = sweep_points.table_of([p["params"] for p in stored],
                                          [p["result"] for p in stored])
        except KeyError:  # points of another code version without the sweep's cells
            table = None
    return {"analysis": analysis, "points": points, "table": table}


def _scalars(doc: dict, prefix: str = "") -> dict:
    """The numbers, strings and booleans of a JSON object, nested keys joined by dots."""
    out = {}
    for k, v in doc.items():
        if isinstance(v, dict):
            out.update(_scalars(v, f"{prefix}{k}."))
        elif v is None or isinstance(v, str | int | float | bool):
            out[f"{prefix}{k}"] = v
    return out


def delete_sweep(con, analysis: str, code_version: str, inputs_sha256: str) -> dict:
    """Delete one stored sweep: ``{"analysis", "deleted"}`` (tasks). Raises KeyError when none
    is stored."""
    n = store.delete_sweep(con, analysis, code_version, inputs_sha256)
    if not n:
        raise KeyError(f"no stored sweep {analysis} {code_version} {inputs_sha256}")
    return {"analysis": analysis, "deleted": n}


def ingest_paths(con, paths: Iterable[Path], fmt: str | None = None, name: str | None = None,
                 opts: ParseOptions | None = None, append_to: str | None = None) -> list[dict]:
    """Parse every file fully, then write all of them in one transaction. ``con`` is a
    connection or an opener (:func:`analytics.services.held`): with an opener the store is
    opened only after every file parsed (and not at all when every file was skipped). A large
    BurstGPT / Azure trace is read in batches while it is written (the store is then held for
    its whole read; :mod:`analytics.ingest.fastcsv`), so memory does not grow with the file.

    Returns ``[{"file", "dataset", "format", "rows", "status"}]`` in file order, status
    ``ingested``, ``appended`` (``append_to``: rows added to that dataset, ``dropped`` those
    already stored), ``duplicate`` or ``skipped`` (a valid file that holds nothing for any table
    by design, e.g. ML.ENERGY diffusion runs; with ``reason``). Raises ValueError (a missing
    file; ``name`` with several files or with ``append_to``), ``FormatError`` (file, line,
    column; nothing written), ``store.NameTaken``, ``store.UnknownDataset`` /
    ``store.AppendRefused`` (``append_to``).
    """
    paths = list(paths)
    if name and len(paths) > 1:
        raise ValueError("--name names one dataset; give one file with it")
    if name and append_to:
        raise ValueError("--name and --append both name the dataset; give one of them")
    for path in paths:
        if (why := not_a_file(path)) is not None:
            raise ValueError(f"{path}: {why}")
    files = [ingest.FileIn(Path(p), str(p), name) for p in paths]
    skipped: list[dict] = []
    items = ingest.parse_all(files, fmt, opts, skipped=skipped,  # before the store is opened
                             append_to=append_to)
    results = []
    if items:
        with held(con) as cur:
            results = ingest.store_items(cur, items)
    results = ingest.in_file_order(files, results + skipped)
    for r in results:
        r["file"] = str(r["file"])
    return results


def ingest_uploads(con, uploads, opts: ParseOptions, max_bytes: int,
                   tmp_dir: Path | None = None, append_to: str | None = None) -> list[dict]:
    """Ingest browser uploads (file-like objects with ``name``), one transaction per file.

    Never raises for bad input: each upload is streamed to a temporary file in ``tmp_dir``
    (default: the system's; the app uses one folder it cleans on start, see
    :func:`clean_upload_dir`) with no second copy in memory, parsed, and written; returns one
    dict per file with ``status`` ``ingested`` / ``duplicate`` / ``skipped`` (valid, nothing for
    any table by design, with ``reason``) / ``rejected`` and, for rejections, ``error`` (file,
    line, column, reason). ``con`` is a connection or an opener
    (:func:`analytics.services.held`): with an opener the store is open for writing only while a
    parsed file's rows are written (for a large BurstGPT / Azure trace, streamed from the
    temporary file in batches, that is while it is read: memory stays flat in the upload's size).

    Names are never a dead end (a browser upload carries only the base name, no folder):
    uploads that share a base name are named ``<stem>-<host or site>`` when the rows carry
    one (DCGM ``Hostname``), and a name already used by other content becomes the first free
    of ``<stem>-<host or site>``, ``<stem>-2``, ``<stem>-3`` ...; the report's first warning
    says which name the file got and why. ``append_to``: each file's rows join that dataset
    instead (status ``appended``; one transaction per file).
    """
    stems = [safe_dataset_name(_stem(up.name)) for up in uploads]
    results = []
    for up, stem in zip(uploads, stems, strict=True):
        suffix = "".join(Path(up.name).suffixes[-2:])
        if tmp_dir is not None:
            Path(tmp_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(suffix=suffix, dir=tmp_dir,
                                         prefix=tempfiles.prefix("upload")) as tmp:
            up.seek(0)
            digest = copy_hashed(up, tmp)  # hashed while copied: no second read
            tmp.flush()
            results.append(_ingest_one(con, ingest.FileIn(Path(tmp.name), up.name, sha256=digest),
                                       stem, stems.count(stem), opts, max_bytes, append_to))
    return results


def ingest_staged(con, staged: Iterable[tuple[Path, str, str | None]], opts: ParseOptions,
                  max_bytes: int, append_to: str | None = None) -> list[dict]:
    """Ingest uploads already on disk (the Data page's streamed uploads,
    :mod:`analytics.ui.upload_route`): ``staged`` is ``(path, name the user gave, sha256 or
    None)``, one transaction per file, named, reported and never raising exactly as
    :func:`ingest_uploads` (``append_to`` likewise). Each file is deleted once it has been
    ingested or refused."""
    staged = list(staged)
    stems = [safe_dataset_name(_stem(name)) for _, name, _ in staged]
    results = []
    for (path, name, digest), stem in zip(staged, stems, strict=True):
        try:
            results.append(_ingest_one(con, ingest.FileIn(Path(path), name, sha256=digest),
                                       stem, stems.count(stem), opts, max_bytes, append_to))
        finally:
            Path(path).unlink(missing_ok=True)
    return results


def _stem(name: str) -> str:
    from analytics.ingest.formats._common import file_stem

    return file_stem(name)


def _ingest_one(con, file, stem: str, same_stem: int, opts: ParseOptions,
                max_bytes: int, append_to: str | None = None) -> dict:
    """Parse one upload on disk (``ingest.FileIn``, ``display`` its user-given name) and write
    it in its own transaction (``append_to``: into that dataset); every refusal is a
    ``rejected`` result, never raised."""
    from analytics.ingest.formats import FormatError, SkippedByDesign

    try:
        [item] = ingest.parse_all([file], opts=opts, max_bytes=max_bytes, append_to=append_to)
        with held(con) as cur:  # the store is held only while the rows are written
            [result] = ingest.store_items(cur, [_upload_item(item, stem, same_stem)])
        return result
    except SkippedByDesign as exc:
        return ingest.skipped_result(exc)
    except FormatError as exc:
        return {"file": file.display, "status": "rejected", "error": str(exc),
                "dataset": None, "rows": 0, "format": None}
    except store.StoreError as exc:  # a browser upload: no server path or SQL in the answer
        logging.getLogger("headroom").warning("upload %s not stored: %s", file.display, exc)
        return {"file": file.display, "status": "rejected", "error": exc.public,
                "dataset": stem, "rows": 0, "format": None}
    except (store.NameTaken, store.UnknownDataset, ValueError) as exc:
        return {"file": file.display, "status": "rejected", "error": str(exc),
                "dataset": append_to or stem, "rows": 0, "format": None}


def _upload_item(item: store.IngestItem, stem: str, same_stem: int) -> store.IngestItem:
    """An upload's item named for the browser: ``<stem>-<host or site>`` when ``same_stem``
    uploads share the stem and the rows name one host or site; free names to fall back on."""
    qualifier = ingest.name_qualifier(item.parsed)
    qualified = f"{stem}-{qualifier}" if qualifier else None
    if same_stem > 1 and qualified:
        why = f"dataset named {qualified!r}: {same_stem} uploaded files are called {stem!r}"
        parsed = dataclasses.replace(item.parsed, warnings=(why, *item.parsed.warnings))
        return dataclasses.replace(item, parsed=parsed, name=qualified, alternatives=())
    return dataclasses.replace(item, alternatives=(qualified,) if qualified else ())


def clean_upload_dir(folder: Path) -> int:
    """Remove upload temporaries (``upload-<pid>-*``) that a server process which is gone left
    in ``folder`` (killed mid-upload, or before it ingested a streamed file), and any older
    than :data:`analytics.tempfiles.STALE_S`; uploads of a live server (this one or another
    on the same store) are kept. Returns how many were removed; a missing folder is fine."""
    return tempfiles.sweep(folder, ("upload",))


def attach(con, name: str, pattern: str | None, refresh: bool = False) -> dict:
    """Attach request files where they live as dataset ``name``, or check an attached dataset
    again (``refresh``): :func:`analytics.ingest.attach.attach`. Operator configuration (it
    reads server paths): the CLI attaches; pages only refresh what is attached."""
    from analytics.ingest.attach import attach as attach_files

    return attach_files(con, name, pattern, refresh)


def attached(con) -> list[dict]:
    """Every attached dataset's state against its files now (:func:`analytics.store.
    attached_status`): pattern, files, bytes, when validated, files changed or new."""
    return [store.attached_status(con, n) for n in store.attached_names(con)]


def delete(con, name: str) -> dict:
    """Remove a dataset and its rows (one transaction). Raises ``store.UnknownDataset``."""
    store.delete_dataset(con, name)
    return {"deleted": name}


#: Most cells (rows x columns) a download is built of in memory: a 20 M-row dataset's CSV built
#: whole passed 6 GB; larger datasets go to a file (:func:`export_file`, ``headroom export``).
EXPORT_MAX_CELLS = 20_000_000


def export_refusal(con, name: str) -> str | None:
    """Why dataset ``name`` is too large to download from the browser, or None (see
    :data:`EXPORT_MAX_CELLS`)."""
    return export_refusal_of(store.dataset(con, name))


def export_refusal_of(info: dict) -> str | None:
    """:func:`export_refusal` from a dataset's ledger row (``name``, ``kind``, ``rows``): no
    store read, so a page can ask it of its cached ledger on every rerun."""
    name = info["name"]
    cells = int(info["rows"]) * len(COLUMNS[info["kind"]])
    if cells <= EXPORT_MAX_CELLS:
        return None
    return (f"{name} has {int(info['rows']):,} rows: too large to build as a download here "
            f"(up to {EXPORT_MAX_CELLS:,} cells); `headroom export {name} --out FILE` writes it "
            "to a file on the server's machine")


def export(con, name: str, fmt: str) -> bytes:
    """All rows of a dataset as ``csv`` or ``parquet`` bytes.

    Raises
    ------
    ValueError
        The dataset is over :data:`EXPORT_MAX_CELLS` (:func:`export_refusal` says why).
    """
    if (why := export_refusal(con, name)) is not None:
        raise ValueError(why)
    df = store.dataset_rows(con, name)
    return df.to_parquet(index=False) if fmt == "parquet" else df.to_csv(index=False).encode()


def export_file(con, name: str, path: Path, fmt: str = "csv") -> dict:
    """Every row of a dataset written to ``path`` (streamed by DuckDB, any size):
    ``{"dataset", "file", "format", "rows", "bytes"}``.

    Raises UnknownDataset; ValueError for a path that is not a file, or whose folder is
    missing or not writable (named before DuckDB is asked: its own error carried the SQL)."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ValueError(f"{path}: {not_a_file(path)}")
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"cannot write {path}: the folder {folder} does not exist; create it "
                         "or choose another --out")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"cannot write {path}: this user may not write there; choose another "
                         "--out")
    rows = store.copy_dataset(con, name, path, fmt)
    return {"dataset": name, "file": str(path), "format": fmt, "rows": rows,
            "bytes": path.stat().st_size}


def registry() -> list[dict]:
    """The official public datasets ``headroom pull`` knows (name, url, licence, citation,
    sha256 or how it is checked)."""
    return [{"name": s.name, "file": s.filename, "url": s.url, "licence": s.licence,
             "citation": s.citation, "sha256": s.sha256,
             "checksum": "sha256 pinned" if s.sha256 else
             "sha256 recorded on the first download, checked after"}
            for s in sources.REGISTRY.values()]


def pull(name: str, dest: Path, url: str | None = None, progress: bool = True,
         on_progress: Callable[[int, int | None], None] | None = None,
         allow_insecure: bool = False) -> dict:
    """Download a registry file into ``dest`` (https only unless ``allow_insecure``; resumable;
    checked against the pinned hash or the one recorded on the first download):
    ``{"name", "path", "sha256", "bytes", "verified", "checksum"}``. Raises
    ``sources.PullError``."""
    return sources.pull(name, dest, url, progress=progress, on_progress=on_progress,
                        allow_insecure=allow_insecure)


def pull_and_ingest(con, name: str, dest: Path,
                    on_progress: Callable[[int, int | None], None] | None = None) -> list[dict]:
    """Pull a registry file, then ingest it. Raises ``PullError``, ``FormatError``."""
    got = pull(name, dest, progress=False, on_progress=on_progress)
    path = Path(got["path"])
    return ingest.ingest_files(con, [ingest.FileIn(path, path.name)])


def recognised_files(folder: Path) -> list[str]:
    """Files under ``folder`` that some format recognises (the first-run bootstrap's list)."""
    return [str(p) for p in ingest.recognised_files(folder)]


def bootstrap(con, folder: Path, on_file: Callable[[int, int, str], None] | None = None
              ) -> list[dict]:
    """First run: ingest every recognised file under ``folder``, one transaction per file; a
    bad file is reported as rejected and does not stop the others, a file that holds nothing
    by design as skipped (see :func:`analytics.ingest.files.bootstrap`)."""
    return ingest.bootstrap(con, folder, on_file=on_file)


def add_synthetic_demo(con) -> list[dict]:
    """Add the labelled synthetic demo, one dataset per kind of input
    (:func:`analytics.ingest.demo.ingest_demo`): the ingest report."""
    return ingest.ingest_synthetic(con)
