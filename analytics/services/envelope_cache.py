"""Disk cache of envelope results beside the store, shared by the CLI and the pages.

A second ``headroom envelope`` with the same data and parameters, and the Demand / Coverage /
Capacity pages after it, read the result instead of refitting (issue 15). The pages' in-process
cache (:mod:`analytics.ui.cache`, keyed on the store's data version) stays the first level; this
is the second.

Key: sha256 of

- the grid the envelope reads (its ``ts`` and ``target`` values and dtypes), i.e. the data
  version of exactly what is fitted: an ingest of another dataset does not invalidate it, and a
  store deleted and rebuilt (whose ``data_version`` counter restarts) cannot serve a stale
  result;
- the bin width and every field of :class:`~analytics.envelope.pipeline.EnvelopeParams`;
- the code version: the source bytes of :mod:`analytics.envelope` and of this module, plus the
  versions of numpy, pandas, scikit-learn, LightGBM and MAPIE.

Layout: ``<store stem>-cache/envelope/<key>/`` holding one Parquet file per table of
:class:`~analytics.envelope.pipeline.EnvelopeResult` and ``meta.json`` for its dicts. No
pickle. Each entry is written to a temporary folder and renamed into place (``os.replace``), so
a reader never sees half an entry; a corrupt or unreadable entry is a miss. At most
:data:`MAX_ENTRIES` entries are kept (the least recently written go first).

``HEADROOM_ENVELOPE_CACHE=off`` turns the cache off; an in-memory store has none.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pandas as pd

from analytics import tempfiles
from analytics.config import cache_dir_for
from analytics.envelope import pipeline

#: entries kept per store; older ones are removed after a write
MAX_ENTRIES = 64
#: Name prefix of an entry being written (:mod:`analytics.tempfiles`: a killed writer's is
#: removed at the next server start or save).
TMP_KIND = tempfiles.ENVELOPE_KIND
#: bump when the layout of an entry changes
FORMAT = 1
FRAMES = ("series", "test", "point_metrics", "interval_metrics", "hourly", "by_regime",
          "rolling", "repairs")
_LIBS = ("numpy", "pandas", "scikit-learn", "lightgbm", "mapie")
log = logging.getLogger("headroom")


def folder_for(db_path: str | Path | None) -> Path | None:
    """``<store stem>-cache/envelope`` beside a store file (``Settings.cache_dir``, shared with
    the advisor's fits); None for an in-memory store or when
    ``HEADROOM_ENVELOPE_CACHE`` is ``off`` / ``0``."""
    if db_path is None or str(db_path) == ":memory:":
        return None
    if os.environ.get("HEADROOM_ENVELOPE_CACHE", "").lower() in ("off", "0", "no", "false"):
        return None
    return cache_dir_for(Path(db_path)) / "envelope"


def code_files() -> list[Path]:
    """The sources whose bytes key the cache: every module of :mod:`analytics.envelope` (the
    point models, the residual stream, every interval method and the repairs) and this one."""
    return [*sorted(Path(pipeline.__file__).parent.glob("*.py")), Path(__file__)]


@functools.cache
def code_version() -> str:
    """sha256 (hex) of :func:`code_files` and the library versions."""
    from analytics.ingest.digest import code_digest

    return code_digest(code_files(), _LIBS)


def grid_digest(grid: pd.DataFrame) -> str:
    """sha256 (hex) of a grid's ``ts`` and ``target`` columns (values and dtypes)."""
    h = hashlib.sha256()
    for col in ("ts", "target"):
        values = grid[col].to_numpy()
        h.update(f"{col}:{values.dtype}:{len(values)}".encode())
        h.update(np.ascontiguousarray(values).tobytes())
    return h.hexdigest()


def key(grid: pd.DataFrame, bin_s: int, params: pipeline.EnvelopeParams) -> str:
    """The entry name (hex) of one envelope run: grid digest, bin width, params, code version."""
    doc = {"format": FORMAT, "grid": grid_digest(grid), "bin_s": int(bin_s),
           "params": asdict(params), "code": code_version()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:40]


def load(folder: Path | None, name: str, params: pipeline.EnvelopeParams
         ) -> pipeline.EnvelopeResult | None:
    """The cached result, or None (no folder, no entry, or an entry that cannot be read)."""
    if folder is None or not (folder / name / "meta.json").is_file():
        return None
    entry = folder / name
    try:
        meta = json.loads((entry / "meta.json").read_text())
        frames = {f: pd.read_parquet(entry / f"{f}.parquet") for f in FRAMES}
        alarm_cols = pd.read_parquet(entry / "alarm.parquet")
    except (OSError, ValueError, KeyError) as exc:  # corrupt / half-deleted entry: refit
        log.warning("envelope cache entry %s unreadable (%s); refitting", entry, exc)
        shutil.rmtree(entry, ignore_errors=True)  # so that the refit can take its place
        return None
    os.utime(entry)  # most recently used: pruned last
    alarm = {**meta["alarm"], "martingale": alarm_cols["martingale"].to_numpy(),
             "ts": alarm_cols["ts"].to_numpy()}
    choice = meta.get("base_choice")  # base_model "auto": the model it chose, and why
    if choice is not None:
        params = replace(params, base_model=choice["chosen"])
    return pipeline.EnvelopeResult(**frames, mae_gain=meta["mae_gain"], split=meta["split"],
                                   alarm=alarm, params=params, base_choice=choice)


def save(folder: Path | None, name: str, result: pipeline.EnvelopeResult) -> bool:
    """Write an entry atomically (temporary folder + ``os.replace``); False when the folder is
    not writable (the result is still returned to the caller, just not cached)."""
    if folder is None:
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = tempfiles.mkdtemp(TMP_KIND, folder)
    except OSError as exc:
        log.warning("envelope cache %s not writable (%s)", folder, exc)
        return False
    try:
        for f in FRAMES:
            getattr(result, f).to_parquet(tmp / f"{f}.parquet", index=False)
        alarm = result.alarm
        pd.DataFrame({"martingale": alarm["martingale"], "ts": alarm["ts"]}).to_parquet(
            tmp / "alarm.parquet", index=False)
        scalars = {k: v for k, v in alarm.items() if k not in ("martingale", "ts")}
        meta = {"mae_gain": result.mae_gain, "split": result.split, "alarm": scalars,
                **({} if result.base_choice is None else {"base_choice": result.base_choice})}
        (tmp / "meta.json").write_text(json.dumps(meta))  # meta last: it marks a whole entry
        os.replace(tmp, folder / name)
    except OSError:  # another process wrote the same entry first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
        return (folder / name / "meta.json").is_file()
    _prune(folder)
    return True


def _prune(folder: Path) -> None:
    """Keep the :data:`MAX_ENTRIES` most recently written entries, and no temporary of a
    process that is gone (:func:`analytics.tempfiles.sweep`)."""
    tempfiles.sweep(folder, (TMP_KIND,))
    entries = sorted((p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[MAX_ENTRIES:]:
        shutil.rmtree(old, ignore_errors=True)
