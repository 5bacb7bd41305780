"""Issue 14 items 4, 5 and 10 on the shared case files and on inputs of the same kinds.

Item 4: a GPU is (host, index, UUID): scrapes / logs of several nodes that share GPU indices
stay apart in the rows, window averages, energy table, chart and CLI.
Item 5: a cumulative counter that drops (driver reload, restart, wrap) is a reset: a warning
names the line; energy comes from reset-aware deltas and is never negative.
Item 10: nvidia-smi ``--format=csv,noheader[,nounits]`` logs take a field list or are refused
(exit 2) with the header they need; sentinels are NULL with a warning naming line and column.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from harness import case_file

from analytics import cli, store, telemetry
from analytics.config import ParseOptions, field_list
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError, parse_file
from analytics.schema import Note
from analytics.ui.charts import telemetry_chart

case = case_file  # a file of ../shared/cases


def run_cli(capsys, *argv) -> tuple[int, object]:
    rc = cli.main([str(a) for a in argv])
    return rc, json.loads(capsys.readouterr().out)


def notes(parsed, word: str) -> list[Note]:
    return [w for w in parsed.warnings if isinstance(w, Note) and word in w.message]


# --------------------------------------------------------------------------- item 4: several nodes
def test_case_20_two_nodes_same_gpu_index_four_series(tmp_path, capsys):
    path = case("20-dcgm-two-nodes-same-gpu-index.prom")
    p = parse_file(path)
    assert p.frame.select("host", "gpu_id").unique().sort("host", "gpu_id").rows() == [
        ("node-a", 0), ("node-a", 1), ("node-b", 0), ("node-b", 1)]
    assert p.frame["gpu_uuid"].n_unique() == 4
    frame = p.frame.to_pandas()
    energy = telemetry.energy_by_gpu(frame)
    assert energy["gpu"].tolist() == ["node-a/0", "node-a/1", "node-b/0", "node-b/1"]
    assert energy["mean_power_w"].tolist() == pytest.approx([100.5, 110.5, 600.5, 620.5])
    avg = telemetry.window_averages(frame, "2024-05-10 12:00", "2024-05-10 12:03")
    power = avg[avg["metric"] == "power_w"]
    assert power["gpu"].tolist() == ["node-a/0", "node-a/1", "node-b/0", "node-b/1"]
    assert power["window"].tolist() == pytest.approx([100.5, 110.5, 600.5, 620.5], abs=0.6)
    fig = telemetry_chart(frame, "power_w")
    assert [t.name for t in fig.data] == ["node-a/0", "node-a/1", "node-b/0", "node-b/1"]
    # the CLI: one row per (host, GPU)
    db = tmp_path / "t.duckdb"
    assert run_cli(capsys, "--db", db, "ingest", path)[0] == 0
    rc, doc = run_cli(capsys, "--db", db, "telemetry", "summary", path.stem)
    assert rc == 0
    assert [(g["host"], g["gpu_id"]) for g in doc["gpus"]] == [
        ("node-a", 0), ("node-a", 1), ("node-b", 0), ("node-b", 1)]
    assert [g["mean_power_w"] for g in doc["gpus"]] == pytest.approx([100.5, 110.5, 600.5,
                                                                       620.5])
    assert {a["gpu"] for a in doc["window_averages"]} == {"node-a/0", "node-a/1", "node-b/0",
                                                          "node-b/1"}


SMI_HOSTS = """host, timestamp, index, power.draw [W], utilization.gpu [%]
node-a, 2024/05/10 12:00:00.000, 0, 100.00 W, 5 %
node-a, 2024/05/10 12:00:00.000, 1, 110.00 W, 7 %
node-a, 2024/05/10 12:00:01.000, 0, 101.00 W, 5 %
node-a, 2024/05/10 12:00:01.000, 1, 111.00 W, 7 %
node-b, 2024/05/10 12:00:00.000, 0, 600.00 W, 98 %
node-b, 2024/05/10 12:00:00.000, 1, 620.00 W, 97 %
node-b, 2024/05/10 12:00:01.000, 0, 601.00 W, 98 %
node-b, 2024/05/10 12:00:01.000, 1, 621.00 W, 97 %
"""


def test_nvidia_smi_logs_of_two_hosts_joined_with_a_host_column(con, tmp_path):
    path = tmp_path / "cluster.csv"
    path.write_text(SMI_HOSTS)
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    rows = store.dataset_rows(con, "cluster")
    summary = telemetry.summarize(rows)
    assert [s["gpu"] for s in summary] == ["node-a/0", "node-a/1", "node-b/0", "node-b/1"]
    assert [s["mean_power_w"] for s in summary] == [100.5, 110.5, 600.5, 620.5]


def test_nvidia_smi_logs_joined_with_cat_repeat_the_header_and_noheader_host_prefix(tmp_path):
    lines = SMI_HOSTS.splitlines(keepends=True)
    path = tmp_path / "catted.csv"
    path.write_text("".join(lines[:5] + lines[:1] + lines[5:]))  # node-b's header again
    p = parse_file(path)
    assert p.frame.height == 8 and p.frame["host"].n_unique() == 2
    # noheader rows prefixed with the host name by the logging script
    path = tmp_path / "prefixed.csv"
    path.write_text("".join(x.replace(" W", "").replace(" %", "") for x in lines[1:]))
    p = parse_file(path, opts=ParseOptions(
        fields=field_list("host,timestamp,index,power.draw,utilization.gpu")))
    energy = telemetry.energy_by_gpu(p.frame.to_pandas())
    assert energy["gpu"].tolist() == ["node-a/0", "node-a/1", "node-b/0", "node-b/1"]
    assert energy["mean_power_w"].tolist() == [100.5, 110.5, 600.5, 620.5]


def test_nvidia_smi_uuid_field_keeps_hosts_apart_without_a_host_column(tmp_path):
    text = ("timestamp, index, uuid, power.draw [W]\n"
            "2024/05/10 12:00:00.000, 0, GPU-aaaa, 100 W\n"
            "2024/05/10 12:00:01.000, 0, GPU-aaaa, 102 W\n"
            "2024/05/10 12:00:00.000, 0, GPU-bbbb, 600 W\n"
            "2024/05/10 12:00:01.000, 0, GPU-bbbb, 602 W\n")
    path = tmp_path / "joined.csv"
    path.write_text(text)
    p = parse_file(path)
    assert not notes(p, "same (time, host, GPU)")  # the UUID tells them apart
    energy = telemetry.energy_by_gpu(p.frame.to_pandas())
    assert energy["gpu"].tolist() == ["joined/0 GPU-aaaa", "joined/0 GPU-bbbb"]
    assert energy["mean_power_w"].tolist() == [101.0, 601.0]
    assert energy["energy_power_j"].tolist() == [101.0, 601.0]  # 1 s of trapezoid


def test_nvidia_smi_pci_bus_id_and_an_unidentified_join_is_warned(tmp_path):
    path = tmp_path / "bus.csv"
    path.write_text("timestamp, index, pci.bus_id, power.draw [W]\n"
                    "2024/05/10 12:00:00.000, 0, 00000000:18:00.0, 100 W\n"
                    "2024/05/10 12:00:00.000, 0, 00000000:2A:00.0, 200 W\n")
    assert parse_file(path).frame["gpu_uuid"].to_list() == ["pci:00000000:18:00.0",
                                                            "pci:00000000:2A:00.0"]
    path.write_text("timestamp, index, power.draw [W]\n"
                    "2024/05/10 12:00:00.000, 0, 100 W\n"
                    "2024/05/10 12:00:00.000, 0, 600 W\n")
    (dup,) = notes(parse_file(path), "same (time, host, GPU)")
    assert dup.lines == (2, 3)


def test_dcgm_scrapes_of_two_nodes_without_hostname_label_are_warned(tmp_path):
    line = 'DCGM_FI_DEV_POWER_USAGE{{gpu="0",device="nvidia0"}} {w} 1715342400000\n'
    path = tmp_path / "two.prom"
    path.write_text(line.format(w=100.0) + line.format(w=600.0))
    p = parse_file(path)
    (twice,) = notes(p, "given twice")
    assert twice.lines == (2,) and p.frame["power_w"].to_list() == [600.0]


# --------------------------------------------------------------------------- item 5: counters
def test_case_21_energy_counter_reset(tmp_path, capsys):
    path = case("21-dcgm-energy-counter-reset.prom")
    p = parse_file(path)
    (reset,) = notes(p, "counter reset")
    assert reset.lines == (6,) and reset.column == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    assert "line 6" in reset
    e = telemetry.energy_by_gpu(p.frame.to_pandas(), "2024-05-10 12:00", "2024-05-10 12:04")
    assert e["energy_counter_j"].tolist() == [63_000.0]  # 18 + 18 + 9 (since reset) + 18 kJ
    assert e["energy_power_j"].tolist() == [72_000.0]  # 300 W x 240 s
    assert e["counter_resets"].tolist() == [1]
    assert e["first_reset_ts"].tolist() == ["2024-05-10T12:03:00"]
    db = tmp_path / "t.duckdb"
    rc, res = run_cli(capsys, "--db", db, "ingest", path)
    assert rc == 0 and any(w["lines"] == [6] and "counter reset" in w["message"]
                           for w in res[0]["warnings"])
    rc, doc = run_cli(capsys, "--db", db, "telemetry", "summary", path.stem,
                      "--start", "2024-05-10T12:00:00", "--end", "2024-05-10T12:04:00")
    assert rc == 0
    (gpu,) = doc["gpus"]
    assert gpu["energy_counter_j"] == 63_000.0 and gpu["energy_power_j"] == 72_000.0
    assert gpu["counter_resets"] == 1 and gpu["gpu"] == "node-c/0"


def test_counter_deltas_rule_reset_wrap_and_gaps():
    d, r = telemetry.counter_deltas([5.0, 7.0, float("nan"), 9.0, 1.0, 4.0])
    assert d.tolist() == [0.0, 2.0, 0.0, 2.0, 1.0, 3.0] and r.tolist().count(True) == 1
    wrap = 2.0**32  # a 32-bit counter just before it wraps
    d, r = telemetry.counter_deltas([wrap - 30.0, wrap - 10.0, 15.0, 40.0])
    assert d[1:].tolist() == [20.0, 15.0, 25.0] and (d >= 0).all() and r[2]


def test_nvidia_smi_energy_counter_reset_after_driver_reload(tmp_path):
    path = tmp_path / "reload.csv"
    path.write_text("timestamp, index, power.draw [W], total_energy_consumption [mJ]\n"
                    "2024/05/10 12:00:00.000, 0, 250.00 W, 500000 mJ\n"
                    "2024/05/10 12:00:10.000, 0, 250.00 W, 3000000 mJ\n"
                    "2024/05/10 12:00:20.000, 0, 250.00 W, 1250000 mJ\n"
                    "2024/05/10 12:00:30.000, 0, 250.00 W, 3750000 mJ\n")
    p = parse_file(path)
    (reset,) = notes(p, "counter reset")
    assert reset.lines == (4,) and reset.column == "total_energy_consumption"
    assert p.frame["energy_j"].to_list() == [500.0, 3000.0, 1250.0, 3750.0]  # mJ -> J, as read
    (s,) = telemetry.summarize(p.frame.to_pandas())
    assert s["energy_j"] == 2500.0 + 1250.0 + 2500.0 and s["counter_resets"] == 1
    assert s["energy_j"] > 0


def test_reset_on_one_of_two_gpus(tmp_path):
    row = ('DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu="{g}",UUID="GPU-{g}",Hostname="n1"}} '
           '{v} {t}\n')
    values = {"0": [1_000_000, 2_000_000, 3_000_000], "1": [7_000_000, 500_000, 1_500_000]}
    text = "".join(row.format(g=g, v=v[i], t=1715342400000 + 60_000 * i)
                   for i in range(3) for g, v in values.items())
    path = tmp_path / "pair.prom"
    path.write_text(text)
    p = parse_file(path)
    (reset,) = notes(p, "counter reset")
    assert reset.lines == (4,)  # GPU 1's second sample; GPU 0 has none
    e = telemetry.energy_by_gpu(p.frame.to_pandas()).set_index("gpu")
    assert e.loc["n1/0", "energy_counter_j"] == 2000.0 and e.loc["n1/0", "counter_resets"] == 0
    assert e.loc["n1/1", "energy_counter_j"] == 500.0 + 1000.0
    assert e.loc["n1/1", "counter_resets"] == 1
    assert (e["energy_counter_j"] >= 0).all()


# --------------------------------------------------------------------------- item 10: noheader
NOHEADER_UNITS = """2024/05/10 12:00:00.123, 0, 69.12 W, 0 %, 4 MiB
2024/05/10 12:00:00.125, 1, [N/A], 0 %, 4 MiB
2024/05/10 12:00:01.124, 0, 412.50 W, 97 %, 70213 MiB
"""
NOHEADER_NOUNITS = """2024/05/10 12:00:00.123, 0, 69.12, 0, 4
2024/05/10 12:00:00.125, 1, [N/A], 0, 4
2024/05/10 12:00:01.124, 0, 412.50, 97, 70213
"""
FIELDS = "timestamp,index,power.draw,utilization.gpu,memory.used"


def test_noheader_log_without_fields_exits_2_with_the_header_it_needs(tmp_path, capsys):
    path = tmp_path / "smi.log.csv"
    path.write_text(NOHEADER_NOUNITS)
    with pytest.raises(FormatError) as exc:
        parse_file(path)
    assert exc.value.line == 1 and "no header" in exc.value.reason
    assert "--fields" in exc.value.reason and "timestamp, index, power.draw" in exc.value.reason
    rc, doc = run_cli(capsys, "--db", tmp_path / "t.duckdb", "ingest", path)
    assert rc == 2 and "no header" in doc["error"] and "KeyError" not in doc["error"]


@pytest.mark.parametrize("text", [NOHEADER_UNITS, NOHEADER_NOUNITS], ids=["units", "nounits"])
def test_noheader_log_with_fields(tmp_path, capsys, text):
    path = tmp_path / "smi.csv"
    path.write_text(text)
    p = parse_file(path, opts=ParseOptions(fields=field_list(FIELDS)))
    assert p.frame["power_w"].to_list() == [69.12, None, 412.5]  # [N/A] is NULL, never 0
    assert p.frame["mem_used_mib"].to_list() == [4.0, 4.0, 70213.0]
    assert p.frame["gpu_util_pct"].to_list() == [0.0, 0.0, 97.0]
    (na,) = notes(p, "[N/A]")
    assert na.lines == (2,) and na.column == "power.draw"  # no header: data start on line 1
    rc, res = run_cli(capsys, "--db", tmp_path / "t.duckdb", "ingest", path, "--fields", FIELDS)
    assert rc == 0 and res[0]["rows"] == 3
    assert any(w["column"] == "power.draw" and w["lines"] == [2] for w in res[0]["warnings"])


def test_header_nounits_log_and_every_sentinel(tmp_path):
    path = tmp_path / "sent.csv"
    path.write_text("timestamp, index, power.draw [W], utilization.gpu [%], temperature.gpu\n"
                    "2024/05/10 12:00:00.000, 0, 70.5, 3, 33\n"
                    "2024/05/10 12:00:01.000, 0, [Not Supported], [Unknown Error], 34\n"
                    "2024/05/10 12:00:02.000, 0, [GPU is lost], N/A, [N/A]\n"
                    "2024/05/10 12:00:03.000, 0, [N/A], 5, 35\n")
    p = parse_file(path)
    f = p.frame
    assert f["power_w"].to_list() == [70.5, None, None, None]
    assert f["gpu_util_pct"].to_list() == [3.0, None, None, 5.0]
    assert f["temp_c"].to_list() == [33.0, 34.0, None, 35.0]
    got = {(n.column, n.message.split(" read")[0]): n.lines for n in notes(p, "read as empty")}
    assert got == {("power.draw", "[Not Supported]"): (3,), ("power.draw", "[GPU is lost]"): (4,),
                   ("power.draw", "[N/A]"): (5,), ("utilization.gpu", "[Unknown Error]"): (3,),
                   ("utilization.gpu", "N/A"): (4,), ("temperature.gpu", "[N/A]"): (4,)}


@pytest.mark.parametrize(("text", "opts", "line", "column", "words"), [
    ("timestamp, power.draw [W]\n2024/05/10 12:00:00.000, 70 W\n", None, 1, "index",
     "no 'index' field"),
    (NOHEADER_NOUNITS, "timestamp,power.draw,utilization.gpu,memory.used,x", 1, "index",
     "no 'index' field"),
    (NOHEADER_NOUNITS, "timestamp,index,power.draw", 1, 4, "field list has 3"),
    (NOHEADER_NOUNITS.replace("412.50", "lots"), FIELDS, 3, "power.draw", "not a number"),
])
def test_bad_smi_logs_rejected_with_line_never_keyerror(tmp_path, text, opts, line, column,
                                                        words):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(FormatError) as exc:
        parse_file(path, fmt="nvidia_smi", opts=ParseOptions(fields=field_list(opts)))
    assert (exc.value.line, exc.value.column) == (line, column)
    assert words in exc.value.reason


def test_dcgm_nan_values_are_null_with_a_warning(tmp_path):
    path = tmp_path / "nan.prom"
    path.write_text('DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n"} NaN 1715342400000\n'
                    'DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="n"} 40 1715342400000\n'
                    'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n"} 150 1715342460000\n')
    p = parse_file(path)
    assert p.frame["power_w"].to_list() == [None, 150.0]
    (nan,) = notes(p, "NaN")
    assert nan.lines == (1,) and nan.column == "DCGM_FI_DEV_POWER_USAGE"
    avg = telemetry.window_averages(p.frame.to_pandas(), pd.Timestamp("2024-05-10 12:00"),
                                    pd.Timestamp("2024-05-10 12:02"))
    assert avg.set_index("metric").loc["power_w", "window"] == 150.0


def test_nvml_sampler_keeps_uuid_and_its_energy_summary_is_reset_aware():
    from test_telemetry import FakeNVML, _fake_time

    class Reloading(FakeNVML):
        calls = 0

        def nvmlDeviceGetUUID(self, h):  # noqa: N802 - pynvml naming
            return f"GPU-{h}".encode()

        def nvmlDeviceGetTotalEnergyConsumption(self, h):  # noqa: N802
            self.calls += 1
            if h == 1 and self.calls == 6:  # GPU 1's third reading: the driver reloaded
                self.energy_mj[1] = 0
            return super().nvmlDeviceGetTotalEnergyConsumption(h)

    clock, sleep = _fake_time()
    frame = telemetry.sample(1.0, 250, nvml=Reloading(), host="h1", clock=clock, sleep=sleep)
    assert sorted(frame["gpu_uuid"].unique()) == ["GPU-0", "GPU-1"]
    s = {r["gpu"]: r for r in telemetry.summarize(frame)}
    assert s["h1/0"]["energy_j"] == pytest.approx(3 * 62.5) and s["h1/0"]["counter_resets"] == 0
    # GPU 1: 62.5, then the counter restarts at 62.5 (counted from 0), then 62.5
    assert s["h1/1"]["energy_j"] == pytest.approx(3 * 62.5) and s["h1/1"]["counter_resets"] == 1
