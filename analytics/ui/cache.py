"""Streamlit caching over :mod:`analytics.services`: the store, data, demand envelopes and
decisions, and the machinery every cached page read uses (:func:`cached`, :func:`memo`,
:func:`data_version`, :func:`figure`). The what-if analyses (advisor, serving, power) are
cached in :mod:`analytics.ui.whatifs` and GPU telemetry in :mod:`analytics.ui.gpu_telemetry`,
on the same machinery. Pages call these modules and nothing else that touches data.

Every cached read is keyed on the store path and its ``data_version`` (plus the arguments), so
an ingest or delete invalidates what depends on the data without any ``.clear()``.
:func:`cached` turns a service ``(con, *args) -> result`` into a page function ``(*args)``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from analytics import store
from analytics.config import GPUKind, ParseOptions, Settings
from analytics.envelope import forecast
from analytics.envelope import grid as grids
from analytics.envelope.pipeline import EnvelopeParams, EnvelopeResult
from analytics.services import data, decisions, demand

StoreBusy = store.StoreBusy  # raised when another process keeps the store locked
StoreError = store.StoreError  # the store cannot be used (its ``public`` message says why)
WAPE_UNDEFINED = forecast.WAPE_UNDEFINED  # why WAPE is empty (zero demand in the test window)
DEMAND_KINDS = data.DEMAND_KINDS
APPENDABLE_KINDS = store.APPENDABLE  # dataset kinds that take appended files


def settings() -> Settings:
    """Store path, data dir and upload cap from the environment."""
    return Settings.from_env()


@contextlib.contextmanager
def connection(write: bool = False) -> Iterator:
    """A short-lived store connection for one read (read-only, so the CLI and other readers
    can use the store at the same time) or one write (``write=True``), closed afterwards.

    Raises store.StoreBusy when another process keeps the store locked (see
    :func:`analytics.store.connect`); the page shows that message.
    """
    con = store.connect(settings().db_path, read_only=not write, migrate_old=True)
    try:
        yield con
    finally:
        con.close()


def sweep_ledger() -> list[dict]:
    """The sweep points kept in the store, by analysis and where they ran
    (:func:`analytics.services.data.sweep_ledger`); read each time (one short query), since
    storing a sweep point does not move the data version."""
    with connection() as con:
        return data.sweep_ledger(con)


@st.cache_data(show_spinner=False, max_entries=8)
def _sweep_view(db_path: str, stamp: tuple, analysis: str, code_version: str,
                inputs_sha256: str) -> dict:
    with connection() as con:
        return data.sweep_view(con, analysis, code_version, inputs_sha256)


def sweep_view(analysis: str, code_version: str, inputs_sha256: str) -> dict:
    """One stored sweep's points and, for a power sweep, its table with bands
    (:func:`analytics.services.data.sweep_view`), read again only when the store file changed
    (:func:`store_stamp`: storing a sweep point moves no data version). Raises KeyError."""
    path = settings().db_path
    return _sweep_view(str(path), store_stamp(path), analysis, code_version, inputs_sha256)


def delete_sweep(analysis: str, code_version: str, inputs_sha256: str) -> dict:
    """Delete one stored sweep (:func:`analytics.services.data.delete_sweep`)."""
    with connection(write=True) as con:
        return data.delete_sweep(con, analysis, code_version, inputs_sha256)


def store_stamp(db_path: Path | None = None) -> tuple:
    """:func:`analytics.store.file_stamp` of the app's store: moves with every committed write,
    costs a ``stat``, not a store connection."""
    return store.file_stamp(db_path or settings().db_path)


#: store path -> (stamp read at, data version, attached files, their stamp when read)
_versions: dict[str, tuple[tuple, int, tuple, tuple]] = {}
_versions_lock = threading.Lock()
#: attached path list -> (monotonic time stat'ed, their stamp): one stat pass a second at
#: most, however many cached reads a page run makes
_file_stamps: dict[tuple, tuple[float, tuple]] = {}

#: Seconds a stat of the attached files stands for (a changed file is seen within it).
FILES_STAT_S = 1.0


def data_version() -> int:
    """The ledger's ``data_version``: the key every cached read depends on.

    Read from the store once per change of :func:`store_stamp` (issue 15: a page rerun used to
    open the store for every cached call, 60-150 ms each, most of a warm rerun); the stamp is
    taken before the read, so a write racing it is seen on the next call. Where datasets are
    attached (read in place), their files are stat'ed too, at most once per
    :data:`FILES_STAT_S`: a changed file moves no store byte, and the version then differs
    from the stored one (its views see the change and refuse until a refresh).
    """
    path = settings().db_path
    stamp = store_stamp(path)
    with _versions_lock:
        hit = _versions.get(str(path))
    if hit is None or hit[0] != stamp or stamp[0] is None:
        with connection() as con:
            version, files = store.data_version(con), store.attached_paths(con)
        hit = (stamp, version, files, store.files_stamp(files))
        with _versions_lock:
            _versions[str(path)] = hit
    _, version, files, then = hit
    if not files:
        return version
    now = _attached_stamp(files)
    if now != then:  # an attached file changed: a new key
        return (version << 32) | zlib.crc32(repr(now).encode())
    return version


def _attached_stamp(files: tuple) -> tuple:
    """:func:`analytics.store.files_stamp` of ``files``, taken again after
    :data:`FILES_STAT_S`."""
    import time

    with _versions_lock:
        got = _file_stamps.get(files)
    if got is not None and time.monotonic() - got[0] < FILES_STAT_S:
        return got[1]
    fresh = store.files_stamp(files)
    with _versions_lock:
        _file_stamps.clear()  # one attached set per store: keep the latest only
        _file_stamps[files] = (time.monotonic(), fresh)
    return fresh


class _Refused:
    """A service's refusal (ValueError / KeyError: too few bins, a missing site hour), kept in
    the cache like a result so a revisit re-raises it at once instead of refitting first."""

    def __init__(self, exc: Exception):
        self.exc = exc


def cached(service: Callable[..., Any], **cache_kwargs) -> Callable[..., Any]:
    """``st.cache_data`` over a service ``(con, *args, **kwargs)``, keyed on the store path,
    the data version, the service's name and the arguments (which must be hashable by
    Streamlit: frozen dataclasses, tuples, scalars, bytes).

    Refusals are cached too (issue 19 item 5): a ValueError or KeyError the service raises is
    stored under the same key and raised again on the next call, without recomputing; a busy
    store or any other error is not kept."""
    def run(service_name: str, db_path: str, version: int, *args, **kwargs):
        with connection() as con:
            try:
                return service(con, *args, **kwargs)
            except (ValueError, KeyError) as exc:
                return _Refused(exc)

    # Streamlit keys a cached function on its qualified name and source: give each its own.
    run.__qualname__ = f"cached[{service.__module__}.{service.__qualname__}]"
    run = st.cache_data(**{"show_spinner": False, **cache_kwargs})(run)

    @functools.wraps(service)
    def call(*args, **kwargs):
        out = run(run.__qualname__, str(settings().db_path), data_version(), *args, **kwargs)
        if isinstance(out, _Refused):
            raise out.exc
        return out
    return call


@st.cache_resource(show_spinner=False, max_entries=64)
def _figure(name: str, _builder: Callable[..., Any], *args, **kwargs):
    return _builder(*args, **kwargs)


def figure(builder: Callable[..., Any], *args, **kwargs):
    """``builder(*args, **kwargs)`` (a chart of :mod:`analytics.ui.charts`), built once per
    distinct inputs (hashed by Streamlit: frames, lists, dicts, scalars) and shared: building a
    Plotly figure (validation of every property) was most of a warm rerun (issue 15). The
    figure is shared between reruns and sessions, so callers must not change it
    (``st.plotly_chart`` copies it)."""
    return _figure(f"{builder.__module__}.{builder.__qualname__}", builder, *args, **kwargs)


# --------------------------------------------------------------------------- data
datasets = cached(data.ledger)
dataset_summary = cached(data.summary)
#: demand datasets, the best to start on first (the sidebar's order and default)
demand_order = cached(data.demand_order)
_supported_targets = cached(demand.supported_targets)


def dataset_names(kinds: tuple[str, ...] | None = None) -> list[str]:
    """Dataset names of the given kinds (all when None), in ledger order."""
    df = datasets()
    if kinds:
        df = df[df["kind"].isin(kinds)]
    return df["name"].tolist()


def dataset_info(name: str) -> dict | None:
    """The ledger row of a dataset as a dict, or None."""
    df = datasets()
    row = df[df["name"] == name]
    return None if row.empty else row.iloc[0].to_dict()


def export_refusal(name: str) -> str | None:
    """Why a dataset is too large to download here, or None
    (:func:`analytics.services.data.export_refusal_of` on the cached ledger row: no store
    read on a page rerun)."""
    info = dataset_info(name)
    return None if info is None else data.export_refusal_of(info)


def export_table(name: str, fmt: str) -> bytes:
    """All rows of a dataset as CSV or Parquet bytes, built when asked and not kept (the Data
    page asks on the download click: a dataset of millions of rows built on every page run,
    and cached, held its whole export in server memory)."""
    with connection() as con:
        return data.export(con, name, fmt)


@st.cache_resource(show_spinner=False)
def _upload_dir(folder: str) -> str:
    """The upload folder, cleaned of a stopped server's temporaries once per server start."""
    removed = data.clean_upload_dir(Path(folder))
    if removed:
        logging.getLogger("headroom").info("removed %d stale upload temporaries", removed)
    return folder


def ingest_uploads(files, opts: ParseOptions, append_to: str | None = None) -> list[dict]:
    """Ingest browser uploads, one transaction per file (``append_to``: as more rows of that
    dataset); never raises for bad input (see :func:`analytics.services.data.ingest_uploads`).
    Each upload is streamed to the upload folder; the store is opened for writing only while a
    parsed file is written."""
    return data.ingest_uploads(functools.partial(connection, write=True), files, opts,
                               settings().max_upload_mb * 1_000_000,
                               Path(_upload_dir(str(settings().upload_dir))), append_to)


def ingest_staged(staged, opts: ParseOptions, append_to: str | None = None) -> list[dict]:
    """Ingest the large-file uploader's files already on disk
    (:class:`analytics.ui.upload_route.Staged`), one transaction per file, reported as
    :func:`ingest_uploads` (``append_to`` likewise); each file is deleted afterwards
    (:func:`analytics.services.data.ingest_staged`)."""
    _upload_dir(str(settings().upload_dir))  # the once-per-start clean, as for small uploads
    return data.ingest_staged(functools.partial(connection, write=True),
                              [(s.path, s.name, s.sha256) for s in staged], opts,
                              settings().max_upload_mb * 1_000_000, append_to)


def refresh_attached(name: str) -> dict:
    """Check an attached dataset's files again (the data version moves). The pattern is the
    one the operator attached; a page never names a path. A refusal (a bad value, a file
    gone) is the report's ``rejected`` row, the dataset as it was."""
    from analytics.ingest.rawfile import FormatError

    try:
        with connection(write=True) as con:
            return data.attach(con, name, None, refresh=True)
    except (FormatError, store.StoreError) as exc:
        return {"file": name, "status": "rejected", "dataset": name, "rows": 0, "format": None,
                "error": getattr(exc, "public", None) or str(exc)}


def delete_dataset(name: str) -> None:
    """Remove a dataset (the data version moves, so caches refresh)."""
    with connection(write=True) as con:
        data.delete(con, name)


def registry() -> list[dict]:
    """Official public datasets that can be pulled."""
    return data.registry()


def pull_and_ingest(name: str, on_progress: Callable[[int, int | None], None]) -> list[dict]:
    """Download a registry file into the data dir and ingest it. Raises PullError/FormatError."""
    with connection(write=True) as con:
        return data.pull_and_ingest(con, name, settings().data_dir, on_progress)


def recognised_files() -> list[str]:
    """Files in the data dir that some format recognises."""
    return data.recognised_files(settings().data_dir)


def bootstrap(on_file: Callable[[int, int, str], None]) -> list[dict]:
    """First run: ingest every recognised file in the data dir."""
    with connection(write=True) as con:
        return data.bootstrap(con, settings().data_dir, on_file)


def add_synthetic_demo() -> list[dict]:
    """Add the labelled synthetic demo trace."""
    with connection(write=True) as con:
        return data.add_synthetic_demo(con)


# --------------------------------------------------------------------------- demand
_grid = cached(demand.grid, show_spinner="Building the demand grid ...")
_envelope = cached(demand.envelope, max_entries=24)
_cold_start = cached(demand.cold_start, max_entries=8)


def targets(name: str) -> list[str]:
    """Demand targets the dataset supports, the default first (tokens, then GPU-seconds)."""
    return [t.value for t in _supported_targets(name)]


def _request(name: str, bin_s: int, w_prompt: float = 1.0, w_completion: float = 1.0,
             include_failed: bool = True, target: str | None = None) -> demand.GridRequest:
    return demand.GridRequest(name, int(bin_s), float(w_prompt), float(w_completion),
                              bool(include_failed), None if target is None else
                              demand.DemandTarget(target))


def demand_grid(name: str, bin_s: int, w_prompt: float = 1.0, w_completion: float = 1.0,
                include_failed: bool = True, target: str | None = None) -> pd.DataFrame:
    """Complete demand grid (:func:`analytics.services.demand.grid`). Raises GridError."""
    return _grid(_request(name, bin_s, w_prompt, w_completion, include_failed, target))


def grid_summary(g: pd.DataFrame) -> dict:
    """Bins, start, end, mean target and zero bins of a grid."""
    return grids.grid_summary(g)


def demand_envelope(name: str, bin_s: int, params: EnvelopeParams, w_prompt: float = 1.0,
                    w_completion: float = 1.0, include_failed: bool = True,
                    target: str | None = None) -> EnvelopeResult:
    """Forecasts, intervals and coverage of a dataset's grid (cached on data version and every
    parameter; a miss here reads the disk cache beside the store, shared with the CLI, before
    it fits: :mod:`analytics.services.envelope_cache`). Raises ValueError (e.g. too short for a
    split) and GridError."""
    return _envelope(_request(name, bin_s, w_prompt, w_completion, include_failed, target),
                     params)


def split_preview(name: str, bin_s: int, params: EnvelopeParams, w_prompt: float = 1.0,
                  w_completion: float = 1.0, include_failed: bool = True,
                  target: str | None = None) -> pd.DataFrame:
    """The grid's bins labelled fit / calibration / test, before any fit: the cached grid
    (:func:`demand_grid`) labelled by :func:`analytics.envelope.pipeline.split_preview` (one
    pass, not cached). The first chart of the envelope pages, drawn while the envelope is
    fitted. Raises ValueError and GridError."""
    from analytics.envelope import pipeline

    grid = demand_grid(name, bin_s, w_prompt, w_completion, include_failed, target)
    return pipeline.split_preview(grid, bin_s, params)


def cold_start(source: str, target_trace: str, bin_s: int, k_hours: tuple[int, ...],
               alpha: float) -> pd.DataFrame:
    """Cross-trace cold-start coverage table (:func:`analytics.services.demand.cold_start`)."""
    return _cold_start(source, target_trace, int(bin_s), tuple(k_hours), float(alpha))


ATLAS_ALPHAS = (0.05, 0.1, 0.2)


def envelope_atlas(alphas: tuple[float, ...] = ATLAS_ALPHAS, bins: tuple[int, ...] = (),
                   datasets: tuple[str, ...] = (), progress=None) -> dict:
    """The envelope atlas (:func:`analytics.services.atlas.run_atlas`): every interval method's
    coverage and width per demand dataset x bin x alpha, as ``{"rows", "hits", "alphas",
    "synthetic", "sweep_run"}``. Cells are kept in the app's store (``sweep_runs``): after a
    restart or a Cancel only the missing ones are computed. Runs on the operator's Dask
    scheduler when one is set, else a local process pool. ``progress(done, total)`` hears of
    each cell (not part of the cache key). Memoised per server on the data version.

    Raises ValueError (an alpha outside (0, 1), no scheduler at the address) and
    ``analytics.sweep.SweepCancelled`` (Cancel; finished cells stored)."""
    from analytics.services import atlas
    from analytics.ui import cluster

    db, version, backend = str(settings().db_path), data_version(), cluster.backend()
    key = (db, version, tuple(sorted(alphas)), tuple(bins), tuple(datasets))

    def compute() -> dict:
        with connection() as con:  # closed before the cells run
            inputs = atlas.atlas_inputs(con, tuple(datasets), tuple(bins))
        return atlas.run_atlas(inputs, tuple(alphas), store_path=db, backend=backend,
                               progress=progress)
    return memo("envelope_atlas", key, compute)

# --------------------------------------------------------------------------- decisions
_capacity = cached(decisions.capacity_plan, max_entries=24)
_dispatch = cached(decisions.dispatch_plan, max_entries=24)
site_catalog = cached(decisions.site_catalog)
_site_carbon_profile = cached(decisions.site_carbon_profile)


def site_carbon_profile(sites: list[str], basis: str | None = None) -> pd.DataFrame:
    """Mean carbon intensity by hour of day per site (cached;
    :func:`analytics.services.decisions.site_carbon_profile`). Raises KeyError."""
    return _site_carbon_profile(tuple(sites), basis)


def capacity_plan(name: str, bin_s: int, params: EnvelopeParams, kinds: list[GPUKind],
                  violation_target: float = 0.05, delta: float = 0.1, objective: str = "cost",
                  available: dict | None = None, utilization: float = 0.8, scale: float = 1.0,
                  gco2_per_kwh: float | None = None):
    """Overbooking + GPU-hours + GPU mix for a dataset (cached on data version and inputs).
    Raises ValueError (short series, uncoverable demand) and GridError."""
    req = decisions.CapacityRequest(tuple(kinds), float(violation_target), float(delta),
                                    objective, tuple(sorted((available or {}).items())),
                                    float(utilization), float(scale), gco2_per_kwh)
    return _capacity(_request(name, bin_s), req, params)


def dispatch_plan(name: str, bin_s: int, params: EnvelopeParams, sites: list[str], kind,
                  scale: float = 1.0, utilization: float = 0.8, offset_days: int = 0,
                  basis: str | None = None, home: str | None = None, max_share: float = 1.0,
                  method: str = "rolling", fill_missing: str = "none",
                  dispatched: str = "provisioned", violation_target: float = 0.05,
                  delta: float = 0.1):
    """Carbon-aware dispatch of a dataset's envelope: ``(Dispatch, notes)`` (cached).
    ``dispatched``: the provisioned capacity (default) or the envelope's upper bound
    (:class:`analytics.services.decisions.DispatchRequest`). Raises ValueError
    (``MissingHours`` when site hours are missing and ``fill_missing`` is ``none``) /
    KeyError."""
    req = decisions.DispatchRequest(tuple(sites), kind, float(scale), float(utilization),
                                    int(offset_days), basis, home, float(max_share), method,
                                    fill_missing, dispatched, float(violation_target),
                                    float(delta))
    return _dispatch(_request(name, bin_s), req, params)


def pue_curve(t_min_c: float = -10.0, t_max_c: float = 45.0):
    """Temperatures and the PUE the dispatch model gives them (reference chart)."""
    return decisions.pue_curve(t_min_c, t_max_c)


# --------------------------------------------------------------------------- long work
@st.cache_resource(show_spinner=False)
def _memo_store() -> dict:
    return {}


def memo_has(name: str, key: tuple) -> bool:
    """Whether :func:`memo` holds a result for ``(name, key)`` (nothing is computed)."""
    return key in _memo_store().get(name, {})


def memo(name: str, key: tuple, compute: Callable[[], Any], max_entries: int = 8) -> Any:
    """``compute()`` once per ``(name, key)`` for the server's life (the ``max_entries`` latest
    per name kept). For long work that reports progress to the page while it runs: inside an
    ``st.cache_data`` function Streamlit refuses updates to a bar drawn outside it. The result
    is shared by every session, so callers must not mutate it."""
    table = _memo_store().setdefault(name, {})
    if key in table:
        table[key] = table.pop(key)  # most recently used last
        return table[key]
    value = compute()
    table[key] = value
    while len(table) > max_entries:
        table.pop(next(iter(table)))
    return value
