"""GPU telemetry for the Telemetry page, cached on the data version like every page read
(:func:`analytics.ui.cache.cached`): stored samples, reference CDFs, the NVML sampler's state
and a short live sample, serving windows, window averages and energy per GPU. Split from
:mod:`analytics.ui.cache` along its telemetry section when that module passed 500 lines."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analytics import telemetry as telemetry_core
from analytics.services import telemetry
from analytics.ui.cache import cached, data_version, settings

DEFAULT_FRESHNESS_S = telemetry.DEFAULT_FRESHNESS_S

telemetry_rows = cached(telemetry.rows)
reference_cdfs = cached(telemetry.reference_cdfs)


@st.cache_data(ttl=60, show_spinner=False)
def nvml_status() -> dict:
    """Whether NVML works on this host, and why not (cached for a minute)."""
    return telemetry_core.status()


def sample_live(seconds: float = 1.0, interval_ms: int = 250) -> pd.DataFrame:
    """A short NVML sample for the live chart (not stored). Raises TelemetryUnavailable."""
    return telemetry_core.sample(seconds, interval_ms)


def serving_window(name: str) -> tuple:
    """A first guess at the serving window of a telemetry dataset (busy samples)."""
    return telemetry_core.detect_serving_window(telemetry_rows(name))


@st.cache_data(show_spinner=False)
def _samples_end(db_path: str, version: int, name: str) -> pd.Timestamp:
    ts = telemetry_rows(name)["ts"]
    return pd.Timestamp(ts.max()) + telemetry_core.sample_step(ts)


def samples_end(name: str) -> pd.Timestamp:
    """End of a telemetry dataset's last sample period: its last sample plus the median
    sample spacing (:func:`analytics.telemetry.sample_step`), once per data version."""
    return _samples_end(str(settings().db_path), data_version(), name)


def window_averages(name: str, start, end, freshness: dict) -> pd.DataFrame:
    """Whole-job vs serving-window means (:func:`analytics.telemetry.window_averages`)."""
    return telemetry_core.window_averages(telemetry_rows(name), start, end, freshness)


def gpu_energy(name: str, start, end) -> pd.DataFrame:
    """Per (host, GPU) power and energy over ``[start, end]`` (reset-aware counter deltas and
    power x time; :func:`analytics.telemetry.energy_by_gpu`)."""
    return telemetry_core.energy_by_gpu(telemetry_rows(name), start, end)


def window_from_vllm_result(payload: bytes) -> tuple:
    """Serving window from an uploaded ``vllm bench serve`` result JSON. Raises ValueError."""
    return telemetry.window_from_vllm_result(payload)
