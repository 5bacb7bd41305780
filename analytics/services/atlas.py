"""Envelope atlas service (issue 17 item 5): coverage and width of every interval method for
every demand dataset x bin x alpha, run as tasks of the sweep runner (:mod:`analytics.sweep`),
kept in the store's ``sweep_runs`` and read back on a rerun.

Two steps, so that no store connection is held while the tasks run (the runner opens its own
short ones to read and keep results): :func:`atlas_inputs` reads the ledger and builds every
grid through :mod:`analytics.services.demand` (the one place demand targets and grids are
resolved); :func:`run_atlas` runs the cells and flattens them into rows.

The envelope's disk cache (:mod:`analytics.services.envelope_cache`) is bypassed on purpose:
the atlas's results are its ``sweep_runs`` rows (a few numbers per cell, keyed by the
dataset's sha256), a task may run on a Dask worker that cannot see the cache folder, and
writing dozens of full envelope entries would evict the pages' entries from that 64-entry
cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import pandas as pd

from analytics import store
from analytics.config import (
    BIN_CHOICES_S,
    MAX_PAGE_BINS,
    MIN_ENVELOPE_BINS,
    bin_choices,
    envelope_bin_choices,
)
from analytics.envelope import atlas
from analytics.envelope import pipeline as envelope_pipeline
from analytics.services import data, demand, envelope_cache


@dataclass
class AtlasInputs:
    """What the atlas's tasks need, read from the store.

    Attributes
    ----------
    cells : ``{"dataset", "bin_s", "sha256", "target"}`` per (dataset, bin) with a grid
    grids : :func:`analytics.envelope.atlas.grid_key` -> grid (``ts``, ``target``)
    refused : ``{"dataset", "bin_s" (None when no bin works), "reason"}`` per (dataset, bin)
        that has no grid (a bin the dataset cannot give, a span too short for any bin)
    synthetic : names of the synthetic datasets among them
    """

    cells: list[dict] = field(default_factory=list)
    grids: dict = field(default_factory=dict)
    refused: list[dict] = field(default_factory=list)
    synthetic: list[str] = field(default_factory=list)


def label_of(bin_s: int) -> str:
    """The bin's label (``"5min"``) when it is one of :data:`BIN_CHOICES_S`, else ``"<s> s"``."""
    return next((k for k, v in BIN_CHOICES_S.items() if v == bin_s), f"{bin_s} s")


def offered_bins(info: dict) -> list[int]:
    """Bins (s) the envelope pages offer for a ledger row: intra-day bins the data supports
    with at least ``MIN_ENVELOPE_BINS`` bins over its span
    (:func:`analytics.config.envelope_bin_choices`, as :func:`analytics.ui.widgets.intraday_bin`)."""
    if info.get("ts_min") is None or pd.isna(info["ts_min"]):
        return []
    span_s = (info["ts_max"] - info["ts_min"]).total_seconds()
    supported = bin_choices(float(info["resolution_s"] or 0), span_s,
                            info["kind"] != "requests")
    return [BIN_CHOICES_S[c] for c in envelope_bin_choices(supported, span_s)]


def bin_refusal(info: dict, bin_s: int | None) -> str:
    """Why the envelope pages offer no bin ``bin_s`` (None: no bin at all) for a ledger row."""
    if info.get("ts_min") is None or pd.isna(info["ts_min"]):
        return "the dataset holds no timestamps"
    span_s = (info["ts_max"] - info["ts_min"]).total_seconds()
    res = float(info["resolution_s"] or 0)
    if bin_s is None:
        if res >= 86400:
            return "the dataset is binned by day; envelopes need intra-day bins"
        return (f"the dataset spans {span_s / 60:,.0f} minutes: no intra-day bin gives the "
                f"{MIN_ENVELOPE_BINS} bins an envelope needs to calibrate")
    if bin_s >= 86400:
        return "daily bins: envelopes need intra-day bins"
    if bin_s not in BIN_CHOICES_S.values():
        return f"{bin_s} s is not one of the bins offered ({', '.join(BIN_CHOICES_S)})"
    if bin_s < res:
        return f"bin {bin_s} s is finer than the data's own {res:g} s"
    if info["kind"] != "requests" and res and bin_s % res:
        return f"bin {bin_s} s is not a multiple of the data's {res:g} s bins"
    if span_s / bin_s > MAX_PAGE_BINS:
        return (f"{span_s / bin_s:,.0f} bins over the dataset's span, over the "
                f"{MAX_PAGE_BINS:,} bins a page fits; choose a coarser bin")
    return (f"{span_s / bin_s:,.0f} bins over the dataset's span, fewer than the "
            f"{MIN_ENVELOPE_BINS} an envelope needs to calibrate")


def atlas_inputs(con, datasets: tuple[str, ...] = (), bins: tuple[int, ...] = ()
                 ) -> AtlasInputs:
    """Every (dataset, bin) of the atlas with its grid, or the reason it has none.

    Parameters
    ----------
    datasets : demand datasets (empty: every ``requests`` / ``demand_series`` dataset in the
        ledger, oldest first)
    bins : bin widths, s (empty: each dataset's :func:`offered_bins`); a bin a dataset does not
        offer is a refused cell with :func:`bin_refusal`'s reason

    Raises
    ------
    store.UnknownDataset
        A name in ``datasets`` is not in the store.
    ValueError
        A named dataset holds no demand (jobs, telemetry, ...).
    """
    if datasets:
        names = list(datasets)
    else:
        ledger = store.list_datasets(con)
        names = ledger.loc[ledger["kind"].isin(data.DEMAND_KINDS), "name"].tolist()
    out = AtlasInputs()
    for name in names:
        info = store.dataset(con, name)
        if info["kind"] not in data.DEMAND_KINDS:
            raise ValueError(f"{name} holds {info['kind']} rows, not LLM demand")
        if info.get("synthetic"):
            out.synthetic.append(name)
        offered = offered_bins(info)
        wanted = list(bins) or offered
        if not wanted:
            out.refused.append({"dataset": name, "bin_s": None,
                                "reason": bin_refusal(info, None)})
        target = demand.resolve_target(con, name).value
        for bin_s in wanted:
            if bin_s not in offered:
                out.refused.append({"dataset": name, "bin_s": int(bin_s),
                                    "reason": bin_refusal(info, int(bin_s))})
                continue
            try:
                g = demand.grid(con, demand.GridRequest(name, int(bin_s)))
            except ValueError as exc:  # GridError
                out.refused.append({"dataset": name, "bin_s": int(bin_s), "reason": str(exc)})
                continue
            out.grids[atlas.grid_key(name, bin_s)] = g[["ts", "target"]].copy()
            out.cells.append({"dataset": name, "bin_s": int(bin_s),
                              "sha256": str(info["sha256"]), "target": target})
    return out


def run_atlas(inputs: AtlasInputs, alphas: tuple[float, ...] = atlas.DEFAULT_ALPHAS, *,
              envelope: envelope_pipeline.EnvelopeParams = demand.DEFAULT_ENVELOPE,
              store_path=None, backend: str | None = None,
              progress: Callable[..., None] | None = None,
              cancel: Callable[[], bool] | None = None) -> dict:
    """Run the atlas's cells on the sweep runner and flatten them.

    One task per (dataset, bin, alpha) (:func:`analytics.envelope.atlas.run_cell`), the grids
    passed once as shared data; the key of each is its parameters (dataset sha256, target, bin,
    alpha, envelope parameters), its seed, the code version of :mod:`analytics.envelope` and
    the envelope's code and library versions (``key_inputs``), so a rerun on the same data
    reads every cell from ``sweep_runs`` at ``store_path``.

    Returns
    -------
    dict: ``rows`` (:data:`analytics.envelope.atlas.COLUMNS`, one per dataset x bin x alpha x
    method, refused cells included with null values and their reason), ``hits`` (per method:
    cells measured, cells at or above target coverage, refused, mean gap in pp), ``alphas``,
    ``synthetic`` (synthetic datasets among the rows) and ``sweep_run``
    (:meth:`analytics.sweep.SweepResult.summary`).

    Raises
    ------
    analytics.sweep.SweepCancelled
        ``cancel()`` returned True; finished cells are stored.
    ValueError
        An alpha outside (0, 1), or no Dask scheduler at ``backend``.
    """
    from analytics.sweep import run_sweep

    alphas = tuple(sorted({float(a) for a in alphas}))
    if not alphas or any(not 0 < a < 1 for a in alphas):
        raise ValueError(f"alphas must be in (0, 1), got {alphas}")
    tasks = atlas.cell_tasks(inputs.cells, alphas, asdict(envelope), envelope.seed)
    res = run_sweep(tasks, shared={"grids": inputs.grids},
                    key_inputs={"envelope_code": envelope_cache.code_version()},
                    store=store_path, backend=backend, progress=progress, cancel=cancel)
    rows = []
    for task, result in zip(tasks, res.results, strict=True):
        p = task.params
        rows += atlas.cell_rows(p["dataset"], p["bin_s"], p["alpha"], result)
    for r in inputs.refused:
        for a in alphas:
            rows += atlas.cell_rows(r["dataset"], r["bin_s"], a, None, r["reason"])
    rows.sort(key=lambda r: (r["dataset"], r["bin_s"] or 0, r["alpha"]))
    return {"rows": rows, "hits": atlas.hits(rows), "alphas": list(alphas),
            "synthetic": inputs.synthetic, "sweep_run": res.summary()}


def frame(doc: dict) -> pd.DataFrame:
    """The atlas rows as a DataFrame (:data:`analytics.envelope.atlas.COLUMNS`)."""
    return pd.DataFrame(doc["rows"], columns=list(atlas.COLUMNS))
