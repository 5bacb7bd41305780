"""Disk cache of a fitted advisor (cost model + job-history context), beside the store.

Fitting the cost model takes seconds (15 LightGBM quantile fits per target plus the grouped and
random folds); the CLI answers ``advise`` from a stored fit instead, keyed by everything the fit
depends on (:func:`cache_key`): the ledger rows of the ``bench_runs`` and ``jobs`` datasets
(id, name, format, rows, ingest time: a re-ingest or delete moves it), the fit parameters, and a
code version (the sources of the modules that shape the fit and the library versions).

One entry is a folder ``<root>/<key>/``:

* ``manifest.json``: schema, CQR offsets (log space), support envelope, metrics, training rows,
  fit parameters, job-history rows, the key's inputs (for audit) and the model file names;
* ``<target>_q<10|50|90>.txt``: LightGBM model text (``Booster.model_to_string``), which
  round-trips every split threshold and leaf value, so predictions are bit-identical;
* ``oof.parquet`` (held-out-cell predictions, for the backtest), ``priors.parquet``,
  ``waits.parquet``.

Never pickle. An entry is written into a temporary sibling folder and renamed into place
(``os.replace``), so a reader sees a complete entry or none; an entry that fails to load is
treated as a miss and replaced. The :data:`KEEP` most recently used entries are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

import lightgbm as lgb
import pandas as pd

from analytics import tempfiles
from analytics.advisor import Advisor, decide
from analytics.advisor import model as cm

#: Bump when the layout of an entry changes.
FORMAT = 2
#: Entries kept per cache folder (newest first by modification time).
KEEP = 4
#: Name prefix of an entry being written (:mod:`analytics.tempfiles`).
TMP_KIND = tempfiles.ADVISOR_KIND
#: Modules whose source shapes a fit (features, folds, calibration, priors, datasheet values,
#: the benchmark / job reads); a change to any of them is a new code version.
_CODE = ("analytics/advisor/__init__.py", "analytics/advisor/model.py",
         "analytics/advisor/priors.py", "analytics/advisor/persist.py",
         "analytics/hardware/catalog.py", "analytics/store/reads.py", "analytics/schema.py")
_LIBS = ("lightgbm", "scikit-learn", "scipy", "numpy", "pandas")


def code_version() -> str:
    """sha256 over the sources in ``_CODE`` and the versions of the libraries in ``_LIBS``."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for rel in _CODE:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    for lib in _LIBS:
        h.update(f"{lib}=={metadata.version(lib)}\0".encode())
    return h.hexdigest()


def cache_key(ledger: pd.DataFrame, params: cm.FitParams) -> tuple[str, dict]:
    """(key, inputs): the key is a sha256 prefix of the inputs as canonical JSON.

    Parameters
    ----------
    ledger : :func:`analytics.store.list_datasets` (every kind; only ``bench_runs`` and ``jobs``
        rows count)
    params : the cost-model fit parameters
    """
    rows = ledger[ledger["kind"].isin(["bench_runs", "jobs"])]
    # a benchmark dataset is one file (its kind takes no appends): its bytes' sha256 and row
    # count say what was fitted, in ledger order (the read order), so the same files give the
    # same key in any store (a re-ingest, another store of the same files); a job history can
    # grow by appends under its first file's sha256, so its ledger row keys it as well
    data = [[str(r.kind), str(r.format), int(r.rows), str(r.sha256)]
            + ([int(r.dataset_id), str(r.ingested_at)] if r.kind == "jobs" else [])
            for r in rows.itertuples(index=False)]
    inputs = {"format": FORMAT, "code": code_version(), "params": asdict(params),
              "datasets": data}
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24], inputs


def _model_file(target: str, q: float) -> str:
    return f"{target}_q{int(round(q * 100))}.txt"


def save(adv: Advisor, root: Path, key: str, inputs: dict) -> bool:
    """Store ``adv`` as entry ``key`` under ``root`` atomically; False when it could not be
    written (unwritable folder, a non-finite metric that strict JSON cannot hold)."""
    cost = adv.cost
    manifest = {"format": FORMAT, "key": key, "inputs": inputs, "schema": cost.schema,
                "offsets": cost.offsets, "envelope": cost.envelope, "metrics": cost.metrics,
                "rows": cost.rows, "params": asdict(cost.params), "jobs_rows": adv.jobs_rows,
                "models": {t: {str(q): _model_file(t, q) for q in qs}
                           for t, qs in cost.models.items()}}
    try:
        text = json.dumps(manifest, allow_nan=False)
        root.mkdir(parents=True, exist_ok=True)
        tmp = tempfiles.mkdtemp(TMP_KIND, root)
    except (ValueError, OSError):
        return False
    try:
        for target, qs in cost.models.items():
            for q, m in qs.items():
                (tmp / _model_file(target, q)).write_text(cm.booster(m).model_to_string())
        cost.oof.to_parquet(tmp / "oof.parquet")
        adv.ctx.priors.to_parquet(tmp / "priors.parquet")
        adv.ctx.waits.to_parquet(tmp / "waits.parquet")
        (tmp / "manifest.json").write_text(text)  # last: an entry with a manifest is complete
        dest = root / key
        if dest.exists():
            if _complete(dest, key):  # another process stored the same fit first
                shutil.rmtree(tmp, ignore_errors=True)
                return True
            shutil.rmtree(dest, ignore_errors=True)  # a damaged entry
        os.replace(tmp, dest)
    except OSError:  # another process renamed the same entry in first, or the disk is full
        shutil.rmtree(tmp, ignore_errors=True)
        return _complete(root / key, key)
    _prune(root)
    return True


def stored(root: Path, key: str) -> bool:
    """Whether a complete entry ``key`` is stored under ``root`` (its manifest names it), without
    loading the models."""
    return _complete(root / key, key)


def _complete(entry: Path, key: str) -> bool:
    try:
        return json.loads((entry / "manifest.json").read_text()).get("key") == key
    except (OSError, ValueError, AttributeError):
        return False


def load(root: Path, key: str) -> Advisor | None:
    """The advisor stored as entry ``key`` under ``root``; None when absent or unreadable."""
    entry = root / key
    try:
        manifest = json.loads((entry / "manifest.json").read_text())
        if manifest.get("format") != FORMAT or manifest.get("key") != key:
            return None
        models = {t: {float(q): lgb.Booster(model_str=(entry / name).read_text())
                      for q, name in qs.items()} for t, qs in manifest["models"].items()}
        params = cm.FitParams(**{**manifest["params"],
                                 "targets": tuple(manifest["params"]["targets"])})
        cost = cm.CostModel(schema=manifest["schema"], models=models,
                            offsets=manifest["offsets"], envelope=manifest["envelope"],
                            metrics=manifest["metrics"],
                            oof=pd.read_parquet(entry / "oof.parquet"),
                            rows=int(manifest["rows"]), params=params)
        ctx = decide.Context(pd.read_parquet(entry / "priors.parquet"),
                             pd.read_parquet(entry / "waits.parquet"))
        adv = Advisor(cost, ctx, int(manifest["jobs_rows"]))
    except (OSError, ValueError, KeyError, TypeError, lgb.basic.LightGBMError):
        return None
    with contextlib.suppress(OSError):  # recently used: kept by the pruning
        os.utime(entry)
    return adv


def _prune(root: Path) -> None:
    """Keep the :data:`KEEP` most recently stored or loaded entries; drop temporaries of a
    process that is gone or older than an hour (:func:`analytics.tempfiles.sweep`)."""
    tempfiles.sweep(root, (TMP_KIND, "."), stale_s=3600)
    try:
        entries = [(p, p.stat().st_mtime) for p in root.iterdir() if p.is_dir()]
    except OSError:
        return
    done = sorted((e for e in entries if not e[0].name.startswith(".")), key=lambda e: -e[1])
    for p, _ in done[KEEP:]:
        shutil.rmtree(p, ignore_errors=True)
