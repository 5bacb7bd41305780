"""Telemetry service: stored GPU telemetry, serving windows, reference CDFs and live NVML
sampling into the store (OmniPilot paper, telemetry priors)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from datetime import UTC, datetime

import pandas as pd
import polars as pl

from analytics import store, telemetry
from analytics.ingest.formats._common import Parsed

DEFAULT_FRESHNESS_S = telemetry.DEFAULT_FRESHNESS_S


def rows(con, name: str) -> pd.DataFrame:
    """All rows of a telemetry dataset (``ts, host, gpu_id, power_w, ...``)."""
    return store.dataset_rows(con, name)


def gpu_energy(con, name: str, start=None, end=None) -> pd.DataFrame:
    """One row per (host, GPU) of a telemetry dataset over ``[start, end]`` (default: all):
    mean / max power (W), energy from the cumulative counter, reset-aware (J), counter resets,
    and power integrated over time (J) (:func:`analytics.telemetry.energy_by_gpu`)."""
    return telemetry.energy_by_gpu(rows(con, name), start, end)


def summary_document(con, name: str, start=None, end=None,
                     freshness: dict[str, float] | None = None) -> dict:
    """The ``headroom telemetry summary`` document: per (host, GPU) energy and power over the
    window, and whole-job vs window means of every metric.

    The window is ``[start, end]`` when both are given, else the busy span
    (:func:`analytics.telemetry.detect_serving_window`), else the whole dataset. Returns
    ``{"dataset", "window": {"start", "end", "source"}, "gpus": [...], "window_averages":
    [...]}`` with ISO 8601 UTC times and null for undefined numbers. Raises
    ``store.UnknownDataset``, ValueError (a window that ends before it starts, or holds no
    sample: the message gives the span the samples cover).
    """
    frame = rows(con, name)
    if frame.empty:
        raise ValueError(f"{name}: no telemetry rows")
    source = "given"
    if start is None or end is None:
        try:
            guess, source = telemetry.detect_serving_window(frame), "busy samples"
        except ValueError:
            guess, source = (frame["ts"].min(), frame["ts"].max()), "whole dataset"
        start = guess[0] if start is None else start
        end = guess[1] if end is None else end
    start, end = pd.Timestamp(start), pd.Timestamp(end)
    averages = telemetry.window_averages(frame, start, end, freshness)
    energy = telemetry.energy_by_gpu(frame, start, end)
    if energy.empty:
        ts = pd.to_datetime(frame["ts"])
        raise ValueError(f"{name}: no sample in the window {start.isoformat()} to "
                         f"{end.isoformat()}; the samples run from {ts.min().isoformat()} to "
                         f"{ts.max().isoformat()}")
    return {"dataset": name,
            "window": {"start": start.isoformat(), "end": end.isoformat(), "source": source},
            "gpus": _records(energy), "window_averages": _records(averages)}


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts (NaN -> None, numpy scalars -> Python)."""
    out = []
    for rec in frame.astype(object).to_dict("records"):
        out.append({k: (None if v is None or (isinstance(v, float) and v != v)
                        else v.item() if hasattr(v, "item") else v) for k, v in rec.items()})
    return out


def reference_cdfs(con) -> pd.DataFrame:
    """Reference distributions (AcmeTrace power / utilisation CDFs) in the store."""
    return store.reference_cdfs(con)


def window_from_vllm_result(data: bytes) -> tuple:
    """Serving window ``(start, end)`` from a ``vllm bench serve`` result JSON: vLLM writes
    ``date`` when the run finishes, so the window is ``[date - duration, date]``.
    Raises ValueError for anything that is not such a result."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ValueError("not a vllm bench serve result (expected a JSON object)")
    return telemetry.window_from_vllm_result(doc)


def sample_into_store(con, seconds: float, interval_ms: int, name: str | None = None,
                      log: Callable[[str], None] | None = None) -> dict:
    """Poll every GPU through NVML for ``seconds`` and store the rows as a telemetry dataset
    (``con`` None: only summarise). Returns ``{"host", "dataset", "rows", "gpus"}``.

    Raises ``telemetry.TelemetryUnavailable`` (no NVIDIA driver; the message says why).
    """
    host = socket.gethostname()
    name = name or f"nvml_{host}_{datetime.now(UTC):%Y%m%dT%H%M%S}"
    created = False

    def on_batch(frame: pd.DataFrame) -> None:
        nonlocal created
        if con is None:
            return
        batch = pl.from_pandas(frame)
        if not created:
            parsed = Parsed("telemetry", "nvml", batch, f"NVML sampler on {host}", 1e-3,
                            ("sampled live through NVML",))
            store.ingest(con, [store.IngestItem(parsed, name, f"nvml:{name}")])
            created = True
        else:
            store.append_rows(con, name, batch)

    if log:
        log(f"sampling for {seconds} s every {interval_ms} ms")
    frame = telemetry.sample(seconds, interval_ms, host=host, on_batch=on_batch)
    return {"host": host, "dataset": None if con is None else name, "rows": int(len(frame)),
            "gpus": telemetry.summarize(frame)}
