"""Telemetry: NVML sampler against a fake NVML, file formats, serving-window averages."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analytics import store, telemetry
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError, parse_file


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
    assert s["0"]["energy_j"] == pytest.approx(3 * 62.5)  # counter delta over 4 samples


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
    assert "no NVIDIA driver" in json.loads(capsys.readouterr().out)["error"]


SMI = """timestamp, index, name, power.draw [W], utilization.gpu [%], memory.used [MiB], \
temperature.gpu, clocks.sm [MHz], clocks.mem [MHz]
2024/05/10 12:00:00.123, 0, NVIDIA H100 80GB HBM3, 69.12 W, 0 %, 4 MiB, 33, 345 MHz, 2619 MHz
2024/05/10 12:00:00.125, 1, NVIDIA H100 80GB HBM3, [N/A], 0 %, 4 MiB, 31, 345 MHz, 2619 MHz
2024/05/10 12:00:01.124, 0, NVIDIA H100 80GB HBM3, 412.50 W, 97 %, 70213 MiB, 61, 1980 MHz, \
2619 MHz
"""

DCGM = """# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="node1"} 132.5 1715342400000
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="node1"} 0.21 1715342400000
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",device="nvidia1",Hostname="node1"} 70.0 1715342400000
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a",Hostname="node1"} 5000000 1715342400000
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="node1"} 189.0 1715342460000
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="node1"} 0.51 1715342460000
"""


def test_nvidia_smi_and_dcgm_ingest_exact_rows(con, tmp_path):
    (tmp_path / "node7.csv").write_text(SMI)
    (tmp_path / "scrape.prom").write_text(DCGM)
    res = ingest.ingest_files(con, [ingest.FileIn(tmp_path / "node7.csv", "node7.csv"),
                                    ingest.FileIn(tmp_path / "scrape.prom", "scrape.prom")])
    assert [(r["format"], r["rows"]) for r in res] == [("nvidia_smi", 3), ("dcgm_prometheus", 3)]
    smi = store.dataset_rows(con, "node7")
    assert smi["power_w"].tolist()[0] == 69.12 and pd.isna(smi["power_w"].tolist()[1])
    assert set(smi["host"]) == {"node7"}
    dcgm = store.dataset_rows(con, "scrape")
    g0 = dcgm[dcgm["gpu_id"] == 0].reset_index()
    assert g0["sm_active"].tolist() == [0.21, 0.51]
    assert g0["energy_j"].iloc[0] == 5000.0  # mJ -> J
    assert str(g0["ts"].iloc[1]) == "2024-05-10 12:01:00"


@pytest.mark.parametrize(("name", "text", "line", "column"), [
    ("bad.csv", SMI.replace("412.50 W", "lots W"), 4, "power.draw"),
    ("ragged.csv", SMI.replace(", 61, 1980", ", 61"), 4, 9),
    ("bad_ts.csv", SMI.replace("2024/05/10 12:00:00.125", "yesterday"), 3, "timestamp"),
    ("bad.prom", DCGM.replace(" 0.51 ", " lots "), 8, None),
    ("garbled.prom", DCGM.replace('DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a",device="nvidia0",'
                                  'Hostname="node1"} 0.21',
                                  'DCGM_FI_PROF_SM_ACTIVE{gpu="0" 0.21'), 4, 1),
])
def test_malformed_telemetry_rejected_with_line(tmp_path, name, text, line, column):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(FormatError) as exc:
        parse_file(path)
    assert exc.value.line == line
    if column is not None:
        assert exc.value.column == column


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


def test_generic_canonical_telemetry_csv(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("ts,host,gpu_id,power_w,sm_active\n"
                    "2024-05-10T12:00:00Z,n1,0,120.5,0.2\n"
                    "2024-05-10T12:00:01Z,n1,0,310.0,0.8\n")
    p = parse_file(path)
    assert (p.format, p.table, p.frame.height) == ("canonical", "telemetry", 2)
    assert p.frame["power_w"].to_list() == [120.5, 310.0]


def test_window_from_vllm_result():
    w = telemetry.window_from_vllm_result({"date": "20240510-120100", "duration": 60,
                                           "completed": 100})
    assert w == (pd.Timestamp("2024-05-10 12:00:00"), pd.Timestamp("2024-05-10 12:01:00"))
    with pytest.raises(ValueError, match="needs 'date'"):
        telemetry.window_from_vllm_result({"duration": 60})
    with pytest.raises(ValueError, match="positive"):
        telemetry.window_from_vllm_result({"date": "20240510-120100", "duration": -1})
