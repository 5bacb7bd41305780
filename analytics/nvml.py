"""The NVML sampler (``pynvml`` from nvidia-ml-py): live GPU readings per GPU, handed out in
batches (moved out of :mod:`analytics.telemetry`, which re-exports :func:`sample`,
:func:`status` and :class:`TelemetryUnavailable`).

:func:`sample` polls NVML per GPU: power (mW -> W), total energy counter (mJ -> J), SM and memory
clocks (MHz), GPU utilisation (%), memory used (bytes -> MiB), temperature (degC) and clock-event
(throttle) reasons; rows are handed out in batches (``on_batch``), e.g. to
:func:`analytics.store.append_rows`.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pandas as pd


class TelemetryUnavailable(RuntimeError):
    """NVML cannot be used here; the message names the cause (no library, no driver, no GPU)."""


def _nvml():
    try:
        import pynvml
    except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a dependency
        raise TelemetryUnavailable("the nvidia-ml-py package is not installed") from exc
    return pynvml


def _init(nvml) -> None:
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        code = getattr(exc, "value", None)
        causes = {
            nvml.NVML_ERROR_LIBRARY_NOT_FOUND:
                "no NVIDIA driver: the NVML library (libnvidia-ml.so) is not installed",
            nvml.NVML_ERROR_DRIVER_NOT_LOADED: "no NVIDIA driver loaded on this host",
            nvml.NVML_ERROR_NO_PERMISSION: "no permission to open the NVIDIA driver",
        }
        raise TelemetryUnavailable(causes.get(code, f"NVML failed to start: {exc}")) from exc


def status(nvml=None) -> dict:
    """``{"available": bool, "reason": str, "gpus": [names]}`` without raising."""
    nvml = nvml or _nvml()
    try:
        _init(nvml)
    except TelemetryUnavailable as exc:
        return {"available": False, "reason": str(exc), "gpus": []}
    try:
        n = nvml.nvmlDeviceGetCount()
        names = [nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(n)]
        names = [n.decode() if isinstance(n, bytes) else n for n in names]
    finally:
        nvml.nvmlShutdown()
    if not names:
        return {"available": False, "reason": "NVML started but found no NVIDIA GPU", "gpus": []}
    return {"available": True, "reason": "", "gpus": names}


def _read(nvml, handle, fn, *args, scale: float = 1.0):
    try:
        value = getattr(nvml, fn)(handle, *args)
    except nvml.NVMLError:  # not supported on this GPU / driver: leave the field empty
        return None
    return value * scale if scale != 1.0 else value


def _throttle(nvml, handle):
    for fn in ("nvmlDeviceGetCurrentClocksEventReasons",
               "nvmlDeviceGetCurrentClocksThrottleReasons"):
        if hasattr(nvml, fn):
            v = _read(nvml, handle, fn)
            if v is not None:
                return int(v)
    return None


def _uuid(nvml, handle) -> str | None:
    if not hasattr(nvml, "nvmlDeviceGetUUID"):
        return None
    v = _read(nvml, handle, "nvmlDeviceGetUUID")
    return v.decode() if isinstance(v, bytes) else v


def sample(seconds: float, interval_ms: int, nvml=None, host: str | None = None,
           on_batch: Callable[[pd.DataFrame], None] | None = None, batch_rows: int = 256,
           clock: Callable[[], float] = time.monotonic,
           sleep: Callable[[float], None] = time.sleep) -> pd.DataFrame:
    """Poll every GPU for ``seconds`` at ``interval_ms``; return all rows.

    Parameters
    ----------
    seconds, interval_ms : duration and polling interval
    nvml : the pynvml module (a test double in tests)
    on_batch : called with each batch of rows (a DataFrame in the ``telemetry`` schema)
    clock, sleep : injectable for tests

    Returns
    -------
    DataFrame with ts (UTC), host, gpu_id, power_w, energy_j, sm_clock_mhz, mem_clock_mhz,
    gpu_util_pct, mem_used_mib, temp_c, throttle_reasons, gpu_uuid

    Raises
    ------
    TelemetryUnavailable : no NVML library, no driver, or no GPU
    ValueError : non-positive duration or interval
    """
    if seconds <= 0 or interval_ms <= 0:
        raise ValueError("seconds and interval_ms must be positive")
    nvml = nvml or _nvml()
    _init(nvml)
    host = host or socket.gethostname()
    rows, batch, frames = [], [], []
    try:
        n = nvml.nvmlDeviceGetCount()
        if n == 0:
            raise TelemetryUnavailable("NVML started but found no NVIDIA GPU")
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        start = clock()
        tick = 0
        while True:
            now = datetime.now(UTC).replace(tzinfo=None)
            for i, h in enumerate(handles):
                util = _read(nvml, h, "nvmlDeviceGetUtilizationRates")
                mem = _read(nvml, h, "nvmlDeviceGetMemoryInfo")
                batch.append({
                    "ts": now, "host": host, "gpu_id": i,
                    "power_w": _read(nvml, h, "nvmlDeviceGetPowerUsage", scale=1e-3),
                    "energy_j": _read(nvml, h, "nvmlDeviceGetTotalEnergyConsumption",
                                      scale=1e-3),
                    "sm_clock_mhz": _read(nvml, h, "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
                    "mem_clock_mhz": _read(nvml, h, "nvmlDeviceGetClockInfo",
                                           nvml.NVML_CLOCK_MEM),
                    "gpu_util_pct": None if util is None else util.gpu,
                    "mem_used_mib": None if mem is None else mem.used / 2**20,
                    "temp_c": _read(nvml, h, "nvmlDeviceGetTemperature",
                                    nvml.NVML_TEMPERATURE_GPU),
                    "throttle_reasons": _throttle(nvml, h),
                    "gpu_uuid": _uuid(nvml, h),
                })
            if len(batch) >= batch_rows:
                frames.append(_flush(batch, on_batch))
                batch = []
            tick += 1
            next_at = start + tick * interval_ms / 1000
            if next_at - start >= seconds:
                break
            sleep(max(0.0, next_at - clock()))
        if batch:
            frames.append(_flush(batch, on_batch))
    finally:
        nvml.nvmlShutdown()
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(rows)


def _flush(batch: list[dict], on_batch) -> pd.DataFrame:
    frame = pd.DataFrame(batch)
    if on_batch:
        on_batch(frame)
    return frame


#: Columns that identify one GPU: logs of several hosts share indices (issue 14 item 4).
