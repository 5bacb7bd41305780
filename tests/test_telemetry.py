"""Telemetry: NVML sampler against a fake NVML, serving-window averages (the telemetry file
formats are tested in tests/ingest/test_telemetry_formats.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from harness import strict_loads

from analytics import telemetry


class FakeNVML:
    """The pynvml surface the sampler uses, with known readings."""

    NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_DRIVER_NOT_LOADED = 12, 9
    NVML_ERROR_NO_PERMISSION, NVML_ERROR_NOT_SUPPORTED = 4, 3
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__(f"NVML error {value}")
            self.value = value

    def __init__(self, gpus=2, init_error=None):
        self.gpus, self.init_error = gpus, init_error
        self.energy_mj = [1_000_000, 5_000_000]
        self.shutdowns = 0

    def nvmlInit(self):  # noqa: N802 - pynvml naming
        if self.init_error is not None:
            raise self.NVMLError(self.init_error)

    def nvmlShutdown(self):  # noqa: N802
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):  # noqa: N802
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return i

    def nvmlDeviceGetName(self, h):  # noqa: N802
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetPowerUsage(self, h):  # noqa: N802
        return 250_000 + 1000 * h  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, h):  # noqa: N802
        self.energy_mj[h] += 62_500  # 250 W for 0.25 s
        return self.energy_mj[h]

    def nvmlDeviceGetClockInfo(self, h, kind):  # noqa: N802
        return 1980 if kind == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetUtilizationRates(self, h):  # noqa: N802
        return SimpleNamespace(gpu=87, memory=40)

    def nvmlDeviceGetMemoryInfo(self, h):  # noqa: N802
        return SimpleNamespace(used=3 * 2**30, total=80 * 2**30)

    def nvmlDeviceGetTemperature(self, h, sensor):  # noqa: N802
        return 61

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):  # noqa: N802
        raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):  # noqa: N802
        return 0x4


def _fake_time():
    now = [0.0]
    return (lambda: now[0]), (lambda dt: now.__setitem__(0, now[0] + dt))


def test_sampler_loop_batches_and_units():
    fake = FakeNVML()
    clock, sleep = _fake_time()
    batches = []
    frame = telemetry.sample(1.0, 250, nvml=fake, host="h1", on_batch=batches.append,
                             batch_rows=3, clock=clock, sleep=sleep)
    assert len(frame) == 4 * 2  # 4 ticks in 1 s at 250 ms, 2 GPUs
    assert [len(b) for b in batches] == [4, 4]  # flushed when >= 3 rows (2 per tick)
    g1 = frame[frame["gpu_id"] == 1].iloc[0]
    assert g1["power_w"] == 251.0  # mW -> W
    assert g1["mem_used_mib"] == 3 * 1024  # bytes -> MiB
    assert g1["energy_j"] == pytest.approx(5_062.5)  # mJ -> J
    assert (g1["sm_clock_mhz"], g1["mem_clock_mhz"], g1["temp_c"]) == (1980, 2619, 61)
    assert g1["throttle_reasons"] == 4  # event-reasons unsupported: throttle-reasons used
    assert fake.shutdowns == 1
    s = telemetry.summarize(frame)
    g0 = next(r for r in s if r["gpu"] == "h1/0")  # one row per (host, GPU)
    assert g0["energy_j"] == pytest.approx(3 * 62.5)  # counter delta over 4 samples
    assert g0["counter_resets"] == 0 and [r["gpu"] for r in s] == ["h1/0", "h1/1"]


@pytest.mark.parametrize(("code", "text"), [
    (12, "no NVIDIA driver: the NVML library"), (9, "no NVIDIA driver loaded"),
    (4, "no permission")])
def test_sampler_names_the_cause(code, text):
    with pytest.raises(telemetry.TelemetryUnavailable, match=text):
        telemetry.sample(1, 100, nvml=FakeNVML(init_error=code))
    st = telemetry.status(FakeNVML(init_error=code))
    assert st["available"] is False and text in st["reason"]


def test_no_gpu_and_real_host_without_driver():
    with pytest.raises(telemetry.TelemetryUnavailable, match="no NVIDIA GPU"):
        telemetry.sample(1, 100, nvml=FakeNVML(gpus=0))
    real = telemetry.status()
    if real["available"]:
        pytest.skip("this host has an NVIDIA GPU")
    assert "NVIDIA" in real["reason"]


@pytest.mark.gpu
def test_real_gpu_sample():
    if not telemetry.status()["available"]:
        pytest.skip("needs a host where NVML initialises")
    frame = telemetry.sample(1.0, 200)
    assert len(frame) >= 5 and (frame["power_w"] > 0).all()


def test_cli_reports_missing_driver(tmp_path, capsys):
    from analytics import cli

    if telemetry.status()["available"]:
        pytest.skip("this host has an NVIDIA GPU")
    rc = cli.main(["--db", str(tmp_path / "t.duckdb"), "telemetry", "sample", "--seconds", "1"])
    assert rc == 1
    assert "no NVIDIA driver" in strict_loads(capsys.readouterr().out)["error"]


def test_serving_window_vs_whole_job_by_hand():
    # one sample a minute: 5 idle minutes of start-up, then 5 minutes of serving
    ts = pd.date_range("2024-05-10 12:00", periods=10, freq="60s")
    frame = pd.DataFrame({"ts": ts, "gpu_id": 0,
                          "sm_active": [0.0] * 5 + [0.8] * 5,
                          "power_w": [60.0] * 5 + [300.0] * 5})
    out = telemetry.window_averages(frame, ts[5], ts[9] + pd.Timedelta("60s"),
                                    {"power_w": 60.0, "sm_active": 60.0}).set_index("metric")
    assert out.loc["sm_active", "whole"] == pytest.approx(0.4)
    assert out.loc["sm_active", "window"] == pytest.approx(0.8)
    assert out.loc["power_w", "whole"] == pytest.approx(180.0)
    assert out.loc["power_w", "window"] == pytest.approx(300.0)
    assert out.loc["power_w", "samples_in_window"] == 5


def test_stale_samples_are_down_weighted():
    t = np.array(["2024-01-01T00:00:00", "2024-01-01T00:02:00"], dtype="datetime64[s]")
    w = telemetry.freshness_weights(t, t[0], t[1] + np.timedelta64(60, "s"), 60.0)
    # first sample stands for 120 s but is fresh for 60: 60 + 60 (1 - e^-1)
    assert w[0] == pytest.approx(60 + 60 * (1 - np.exp(-1)))
    assert w[1] == pytest.approx(60.0)
    with pytest.raises(ValueError, match="ends"):
        telemetry.window_averages(pd.DataFrame({"ts": [], "gpu_id": []}), t[1], t[0])


def test_detect_serving_window():
    ts = pd.date_range("2024-05-10 12:00", periods=6, freq="10s")
    frame = pd.DataFrame({"ts": ts, "gpu_util_pct": [0, 0, 90, 95, 10, 0],
                          "power_w": [60, 60, 300, 310, 80, 60]})
    assert telemetry.detect_serving_window(frame) == (ts[2], ts[4])  # to the end of ts[3]


def test_window_from_vllm_result():
    w = telemetry.window_from_vllm_result({"date": "20240510-120100", "duration": 60,
                                           "completed": 100})
    assert w == (pd.Timestamp("2024-05-10 12:00:00"), pd.Timestamp("2024-05-10 12:01:00"))
    with pytest.raises(ValueError, match="needs 'date'"):
        telemetry.window_from_vllm_result({"duration": 60})
    with pytest.raises(ValueError, match="positive"):
        telemetry.window_from_vllm_result({"date": "20240510-120100", "duration": -1})
