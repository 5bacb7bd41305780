"""Demand service: which target a dataset supports, its complete grid, envelopes, cold start.

This is the ONE place that resolves a dataset's demand target (tokens when the trace has token
counts, GPU-seconds when it only reports execution time) for the CLI, the pages and the power
simulation alike (conformal demand envelopes paper, Sec. 3: the 5-minute weighted-token target).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from analytics import store
from analytics.config import BIN_CHOICES_S, MAX_GRID_BINS, DemandTarget, Weights, parse_bin
from analytics.envelope import grid as grids
from analytics.envelope import pipeline
from analytics.services import envelope_cache

#: One default for every front end (the CLI and the pages used to differ in the bootstrap count).
DEFAULT_ENVELOPE = pipeline.EnvelopeParams()


@dataclass(frozen=True)
class GridRequest:
    """Which grid to build.

    Attributes
    ----------
    dataset : dataset name in the store (``requests`` or ``demand_series`` kind)
    bin_s : bin width, seconds (> 0)
    w_prompt, w_completion : token weights of the target (ignored for pre-binned series and for
        the GPU-seconds target)
    include_failed : count failed requests (BurstGPT ``Response tokens = 0``)
    target : demand target; ``None`` picks the dataset's default (:func:`resolve_target`)
    """

    dataset: str
    bin_s: int = 300
    w_prompt: float = 1.0
    w_completion: float = 1.0
    include_failed: bool = True
    target: DemandTarget | None = None

    @classmethod
    def of(cls, dataset: str, bin: str | int = "5min", **kwargs) -> GridRequest:
        """Build from a bin spec such as ``"5min"`` (ValueError when not understood)."""
        target = kwargs.pop("target", None)
        return cls(dataset, parse_bin(bin), target=None if target is None else
                   DemandTarget(target), **kwargs)


def demand_grid(con, name: str, bin: str | int = "5min", weights: Weights | None = None
                ) -> pd.DataFrame:
    """Complete, zero-filled demand grid of a dataset.

    Parameters
    ----------
    con : store connection
    name : dataset name (``requests`` or ``demand_series`` kind)
    bin : bin width, ``"5min"``, ``"1h"``, ``300`` (seconds)
    weights : target weights; pre-binned series have no prompt/completion split (the weights
        do not apply) and no GPU-seconds (that target is refused)

    Returns
    -------
    DataFrame of shape (n_bins, k): ``ts`` (bin start, UTC), ``requests`` (may be empty for
    series without counts), ``tokens`` and ``target`` (weighted tokens per bin), plus
    ``failed``, ``prompt_tokens``, ``completion_tokens`` for request datasets.

    Raises
    ------
    GridError
        The dataset holds no demand, ``bin`` is finer than (or not a multiple of) the data's
        own bin, the grid would exceed ``config.MAX_GRID_BINS`` bins, or the target is one the
        dataset does not carry (GPU-seconds of a token trace or series, tokens of a
        GPU-seconds-only trace).
    store.UnknownDataset
        No dataset of that name.
    """
    return _demand_grid(con, store.dataset(con, name), bin, weights or Weights())


def _demand_grid(con, info: dict, bin: str | int, weights: Weights,
                 has: dict[str, bool] | None = None) -> pd.DataFrame:
    """:func:`demand_grid` of the ledger row ``info``; ``has``: its :func:`store.request_fields`
    when the caller already read them."""
    name = info["name"]
    bin_s = parse_bin(bin)
    resolution = float(info["resolution_s"] or 0)
    _check_grid_size(info, bin_s)
    if info["kind"] == "requests":
        if bin_s < resolution:
            raise grids.GridError(f"{name}: bin {bin_s} s is finer than the data's {resolution} s")
        has = has or _fields(con, info)
        if weights.target == "gpu_seconds" and not has["gpu_s"]:
            raise grids.GridError(f"{name} reports no GPU execution time; use the token target")
        if weights.target == "weighted_tokens" and not has["tokens"]:
            raise grids.GridError(f"{name} has no token counts; use target gpu_seconds")
        # the ledger's span and the field probe's answer: requests_grid need not ask again
        known = None if pd.isna(info["ts_min"]) else (
            info["ts_min"].to_pydatetime(), info["ts_max"].to_pydatetime(), has["empty_tokens"])
        return store.requests_grid(con, int(info["dataset_id"]), bin_s, weights, known)
    if info["kind"] == "demand_series":
        if bin_s < resolution:
            raise grids.GridError(
                f"{name}: bin {bin_s} s is finer than the data's own {int(resolution)} s bins; "
                f"choose {int(resolution)} s or a multiple of it"
            )
        if bin_s % int(resolution):
            raise grids.GridError(
                f"{name}: bin {bin_s} s is not a multiple of the data's {int(resolution)} s bins"
            )
        if weights.target == "gpu_seconds":  # the grid would be tokens under a GPU-seconds label
            raise grids.GridError(f"{name} is a pre-binned token series: it has no GPU-seconds; "
                                  "use the token target")
        return store.series_grid(con, int(info["dataset_id"]), bin_s)
    raise grids.GridError(f"{name} holds {info['kind']} rows, not LLM demand")


def _check_grid_size(info: dict, bin_s: int) -> None:
    """Raise GridError when the dataset's span at ``bin_s`` would need over MAX_GRID_BINS bins."""
    if info["ts_min"] is None or str(info["ts_min"]) in ("NaT", "None"):
        return
    span_s = (info["ts_max"] - info["ts_min"]).total_seconds()
    n_bins = int(span_s // bin_s) + 1
    if n_bins > MAX_GRID_BINS:
        coarser = next((label for label, s in BIN_CHOICES_S.items()
                        if span_s // s + 1 <= MAX_GRID_BINS), None)
        raise grids.GridError(
            f"{info['name']}: {span_s / 86400:,.1f} days at {bin_s} s bins is {n_bins:,} bins, "
            f"over the {MAX_GRID_BINS:,}-bin cap of any grid"
            + (f"; choose {coarser} or coarser" if coarser else ""))


def supported_targets(con, dataset: str) -> list[DemandTarget]:
    """Demand targets a dataset supports, its default first (tokens, then GPU-seconds).

    Pre-binned series carry tokens only. Raises ``store.UnknownDataset``.
    """
    info = store.dataset(con, dataset)
    return _targets(info, _fields(con, info))


def _fields(con, info: dict) -> dict[str, bool] | None:
    """What a grid asks of :func:`store.request_fields` (token counts, GPU-seconds, empty
    token counts) for a request dataset's ledger row, None for other kinds."""
    return store.request_fields(con, int(info["dataset_id"]), _GRID_FIELDS) \
        if info["kind"] == "requests" else None


_GRID_FIELDS = ("tokens", "gpu_s", "empty_tokens")


def _targets(info: dict, has: dict[str, bool] | None) -> list[DemandTarget]:
    if info["kind"] != "requests":
        return [DemandTarget.WEIGHTED_TOKENS]
    return [t for t, ok in ((DemandTarget.WEIGHTED_TOKENS, has["tokens"]),
                            (DemandTarget.GPU_SECONDS, has["gpu_s"])) if ok]


def resolve_target(con, dataset: str, asked: DemandTarget | str | None = None) -> DemandTarget:
    """The demand target to use: ``asked`` if given, else the dataset's default.

    A request trace without token counts (Alibaba GenAI LoRA) defaults to GPU-seconds; every
    other dataset to weighted tokens. An ``asked`` target the data cannot give is refused later
    by the grid with a message saying which target to use.
    """
    if asked is not None:
        return DemandTarget(asked)
    return _default(supported_targets(con, dataset))


def _default(found: list[DemandTarget]) -> DemandTarget:
    return found[0] if found else DemandTarget.WEIGHTED_TOKENS


def grid(con, req: GridRequest) -> pd.DataFrame:
    """Complete, zero-filled demand grid (see :func:`demand_grid`).

    Returns a frame of shape (n_bins, k) with ``ts`` (UTC bin start) and ``target`` (demand per
    bin in the resolved target's unit). Raises ``grid.GridError``, ``store.UnknownDataset``.
    """
    info = store.dataset(con, req.dataset)  # one ledger read and one field probe per grid
    has = _fields(con, info)
    target = DemandTarget(req.target) if req.target is not None else _default(_targets(info, has))
    weights = Weights(req.w_prompt, req.w_completion, include_failed=req.include_failed,
                      target=target)
    return _demand_grid(con, info, req.bin_s, weights, has)


def grid_document(con, req: GridRequest, rows: bool = False) -> dict:
    """The ``headroom grid`` document: bins, start, end, mean target, zero bins, the target
    used and (``rows``) every bin."""
    g = grid(con, req)
    target = resolve_target(con, req.dataset, req.target)
    out = grids.grid_summary(g)
    out["bin_s"] = req.bin_s
    out["target"] = target.description
    if rows:
        frame = g.copy()
        frame["ts"] = frame["ts"].map(lambda t: t.isoformat())
        out["rows"] = json.loads(frame.to_json(orient="records"))
    return out


def envelope(con, req: GridRequest, params: pipeline.EnvelopeParams = DEFAULT_ENVELOPE
             ) -> pipeline.EnvelopeResult:
    """Point forecasts, the six interval methods and their coverage on a dataset's grid
    (:func:`analytics.envelope.pipeline.run_envelope`), read from the disk cache beside the
    store when the same grid was fitted with the same parameters and code
    (:mod:`analytics.services.envelope_cache`). Raises ValueError (series too short for the
    split), ``GridError``, ``store.UnknownDataset``."""
    return envelope_of_grid(con, grid(con, req), req.bin_s, params)[0]


def envelope_of_grid(con, g: pd.DataFrame, bin_s: int,
                     params: pipeline.EnvelopeParams = DEFAULT_ENVELOPE
                     ) -> tuple[pipeline.EnvelopeResult, str]:
    """:func:`analytics.envelope.pipeline.run_envelope` on a grid already built from the store
    ``con``, through the disk cache beside that store.

    Returns ``(result, cache)`` with ``cache`` = ``"hit"`` (read, nothing fitted), ``"miss"``
    (fitted and written) or ``"off"`` (in-memory store, ``HEADROOM_ENVELOPE_CACHE=off``, or a
    cache folder that cannot be written). The numbers are the same either way.
    """
    folder = envelope_cache.folder_for(store.db_path(con))
    name = envelope_cache.key(g, bin_s, params) if folder is not None else ""
    cached = envelope_cache.load(folder, name, params)
    if cached is not None:
        return cached, "hit"
    result = pipeline.run_envelope(g, bin_s, params)
    return result, "miss" if envelope_cache.save(folder, name, result) else "off"


def envelope_document(con, req: GridRequest,
                      params: pipeline.EnvelopeParams = DEFAULT_ENVELOPE) -> dict:
    """The ``headroom envelope`` document (strict JSON values; see the CLI contract), with
    ``cache``: ``"hit"`` when the result was read from the disk cache beside the store,
    ``"miss"`` when it was fitted and cached, ``"off"`` when there is no cache."""
    result, cache = envelope_of_grid(con, grid(con, req), req.bin_s, params)
    return {"dataset": req.dataset, "bin_s": req.bin_s, **pipeline.to_json(result),
            "cache": cache}


def cold_start(con, source: str, target_trace: str, bin_s: int, k_hours: tuple[int, ...],
               alpha: float = 0.1) -> pd.DataFrame:
    """Fit on ``source``, calibrate on the first k hours of ``target_trace``, measure coverage
    on the rest (:func:`analytics.envelope.pipeline.cold_start`); each trace on its own default
    demand target. Returns one row per (method, k)."""
    grids_ = [grid(con, GridRequest(name, bin_s)) for name in (source, target_trace)]
    return pipeline.cold_start(*grids_, bin_s, k_hours, pipeline.EnvelopeParams(alpha=alpha))
