"""The envelope atlas as tasks of :mod:`analytics.sweep` (issue 17 item 5): coverage and mean
width of every registered interval method (:data:`analytics.envelope.registry.METHODS`) for
every demand dataset x bin x alpha, one task per (dataset, bin, alpha), each a call of
:func:`run_cell`, and the flattening of their results into one row per
(dataset, bin, alpha, method).

Each cell is :func:`analytics.envelope.pipeline.run_envelope` with the envelope's default
parameters (:data:`analytics.services.demand.DEFAULT_ENVELOPE`) and the cell's alpha, so a cell
gives the numbers ``headroom envelope DATASET --bin B --alpha A`` reports. The grids are built
in the service (one store connection, before any task runs) and passed to the tasks as shared
data: a Dask worker on another machine cannot open the store file, and local workers opening a
DuckDB file that the app may hold for writing would contend for its lock.

A cell the envelope refuses (too few calibration bins for alpha, a split that does not fit) is
kept: its rows carry null values and the envelope's reason, never dropped.
"""

from __future__ import annotations

import contextlib
import logging

import numpy as np

from analytics.envelope import pipeline
from analytics.envelope.registry import INTERVAL_METHODS
from analytics.sweep import Task

#: Store name of one atlas cell (the first part of its ``sweep_runs`` key).
ANALYSIS = "envelope.atlas_cell"
#: The task function.
FN = "analytics.envelope.atlas:run_cell"
#: The columns of an atlas row, in order.
COLUMNS = ("dataset", "bin_s", "alpha", "method", "coverage", "target_coverage",
           "coverage_gap_pp", "mean_width", "wape", "n_test", "reason")
#: Default miscoverages of the atlas.
DEFAULT_ALPHAS = (0.05, 0.1, 0.2)


def grid_key(dataset: str, bin_s: int) -> str:
    """Name of a grid in the tasks' shared ``grids`` mapping."""
    return f"{dataset}@{int(bin_s)}"


@contextlib.contextmanager
def _quiet_root():
    """No INFO lines from MAPIE on a worker's stderr: MAPIE's CQR calls
    ``logging.basicConfig(level=INFO)`` then ``logging.info("The predictions are ill-sorted.")``
    (mapie/utils.py), which configures a bare root logger; a root with a handler (a
    ``NullHandler`` here, while the cell runs) at WARNING makes both no-ops."""
    root = logging.getLogger()
    level, null = root.level, None
    if not root.handlers:
        null = logging.NullHandler()
        root.addHandler(null)
    root.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        root.setLevel(level)
        if null is not None:
            root.removeHandler(null)


def run_cell(params: dict, seed: int, *, grids: dict) -> dict:
    """One atlas cell (a :mod:`analytics.sweep` task function).

    Parameters
    ----------
    params : ``dataset``, ``bin_s`` (s), ``alpha``, ``sha256`` (of the dataset: the key's data
        version), ``target`` (demand target of the grid) and ``envelope`` (the other
        :class:`~analytics.envelope.pipeline.EnvelopeParams` fields)
    seed : seed of the envelope's learned models and bootstrap (``EnvelopeParams.seed``)
    grids : :func:`grid_key` -> grid (``ts``, ``target``), shared by every task of the atlas

    Returns
    -------
    dict: ``methods`` ({method: {coverage, mean_width (target unit per bin; null when every
    interval is unbounded), infinite_bins}}), ``wape`` (of the base model on the test window;
    null with zero demand there), ``n_test`` (bins), ``base_model``, ``null_reasons`` (path ->
    why, as ``headroom envelope``), ``reason`` (None); or, for a cell the envelope refuses,
    ``methods`` None and ``reason`` the envelope's message.
    """
    fields = {**params["envelope"], "alpha": float(params["alpha"]), "seed": int(seed)}
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    env_params = pipeline.EnvelopeParams(**fields)
    grid = grids[grid_key(params["dataset"], params["bin_s"])]
    try:
        with _quiet_root():
            result = pipeline.run_envelope(grid, int(params["bin_s"]), env_params)
    except ValueError as exc:  # too few bins for the split or for alpha: a refused cell
        return {"methods": None, "wape": None, "n_test": None, "reason": str(exc),
                "base_model": env_params.base_model, "null_reasons": {}}
    doc = pipeline.to_json(result)
    base = doc["point"].get(result.params.base_model, {})  # "auto": the model it chose
    return {"methods": {m: {k: v[k] for k in ("coverage", "mean_width", "infinite_bins")}
                        for m, v in doc["intervals"].items()},
            "wape": base.get("wape"), "n_test": int(result.split["test"]["bins"]),
            "base_model": result.params.base_model, "null_reasons": doc["null_reasons"],
            "reason": None}


def cell_tasks(cells: list[dict], alphas, envelope: dict, seed: int = 0) -> list[Task]:
    """One task per cell x alpha, in that order.

    Parameters
    ----------
    cells : ``{"dataset", "bin_s", "sha256", "target"}`` per (dataset, bin) that has a grid
    alphas : miscoverages in (0, 1)
    envelope : the other :class:`~analytics.envelope.pipeline.EnvelopeParams` fields
        (``dataclasses.asdict``; ``alpha`` and ``seed`` are set per task)
    seed : the envelope's seed
    """
    env = {k: v for k, v in envelope.items() if k not in ("alpha", "seed")}
    return [Task(ANALYSIS, FN, {**cell, "alpha": float(a), "envelope": env}, int(seed))
            for cell in cells for a in alphas]


def _num(value) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def cell_rows(dataset: str, bin_s: int | None, alpha: float, result: dict | None,
              reason: str | None = None, methods=INTERVAL_METHODS) -> list[dict]:
    """The atlas rows (:data:`COLUMNS`) of one cell: one per method, in registry order.

    ``result`` is :func:`run_cell`'s dict, or None for a cell refused before any task (no grid:
    ``reason`` says why). ``coverage`` and ``target_coverage`` are fractions,
    ``coverage_gap_pp`` is ``100 * (coverage - target_coverage)`` (percentage points; negative:
    under-covers), ``mean_width`` is in the grid's target unit per bin, ``wape`` is the base
    model's; ``reason`` says why the values of a row are null (refusal, or an undefined WAPE /
    width), None when every value is defined.
    """
    target = round(1.0 - float(alpha), 12)
    found = (result or {}).get("methods")
    rows = []
    for m in methods:
        base = {"dataset": dataset, "bin_s": None if bin_s is None else int(bin_s),
                "alpha": float(alpha), "method": m, "target_coverage": target}
        if not found or m not in found:
            why = reason or (result or {}).get("reason") or f"{m}: no result for this cell"
            rows.append({**base, "coverage": None, "coverage_gap_pp": None, "mean_width": None,
                         "wape": None, "n_test": None, "reason": why})
            continue
        v = found[m]
        cov = _num(v["coverage"])
        notes = [why for path, why in result.get("null_reasons", {}).items()
                 if path == f"intervals.{m}.mean_width" or path.endswith(
                     f"{result.get('base_model')}.wape")]
        rows.append({**base, "coverage": cov,
                     "coverage_gap_pp": None if cov is None else round(100 * (cov - target), 6),
                     "mean_width": _num(v["mean_width"]), "wape": _num(result.get("wape")),
                     "n_test": result.get("n_test"), "reason": "; ".join(notes) or None})
    return [{c: r[c] for c in COLUMNS} for r in rows]


def hits(rows: list[dict], tolerance_pp: float = 0.0) -> dict:
    """Per method: cells measured, cells whose coverage reaches its target (gap >= -tolerance),
    and the mean gap (pp) over the measured cells. Refused cells are counted apart."""
    out: dict[str, dict] = {}
    for r in rows:
        s = out.setdefault(r["method"], {"cells": 0, "hit": 0, "refused": 0, "gaps": []})
        if r["coverage_gap_pp"] is None:
            s["refused"] += 1
            continue
        s["cells"] += 1
        s["hit"] += int(r["coverage_gap_pp"] >= -tolerance_pp)
        s["gaps"].append(r["coverage_gap_pp"])
    return {m: {"cells": s["cells"], "hit_target": s["hit"], "refused": s["refused"],
                "mean_gap_pp": float(np.mean(s["gaps"])) if s["gaps"] else None}
            for m, s in out.items()}


__all__ = ["ANALYSIS", "COLUMNS", "DEFAULT_ALPHAS", "FN", "cell_rows", "cell_tasks", "grid_key",
           "hits", "run_cell"]
