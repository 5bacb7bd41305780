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
