"""Issue 14 items 4, 5 and 10 on the pages: the Telemetry page shows one row per (host, GPU)
and reset-aware energy; the Data page takes the field list of a header-less nvidia-smi log."""

from __future__ import annotations

from datetime import datetime

import pytest
from harness import SHARED_DATA, missing, new_app, table_with, uploader_key

CASES = SHARED_DATA.parent / "cases"


def upload(at, name: str, data: bytes, fields: str | None = None):
    at.switch_page("pages/data.py").run()
    at.file_uploader(key=uploader_key(at)).set_value([(name, data, "text/plain")])
    if fields is not None:
        at.text_input(key="smi_fields").set_value(fields)
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    return at


def case_bytes(name: str) -> bytes:
    path = CASES / name
    if not path.exists():
        missing(path)
    return path.read_bytes()


def test_case_20_telemetry_page_one_row_per_host_and_gpu(app_env):
    at = upload(new_app().run(), "two-nodes.prom",
                case_bytes("20-dcgm-two-nodes-same-gpu-index.prom"))
    at.switch_page("pages/telemetry.py").run()
    assert not at.exception
    energy = table_with(at, "energy_counter_j")
    assert energy["gpu"].tolist() == ["node-a/0", "node-a/1", "node-b/0", "node-b/1"]
    assert energy["mean_power_w"].tolist() == pytest.approx([100.5, 110.5, 600.5, 620.5])
    window = table_with(at, "metric")
    power = window[window["metric"] == "power_w"]
    assert power["gpu"].tolist() == ["node-a/0", "node-a/1", "node-b/0", "node-b/1"]


def test_case_21_telemetry_page_reset_aware_energy(app_env):
    at = upload(new_app().run(), "reset.prom", case_bytes("21-dcgm-energy-counter-reset.prom"))
    warnings = table_with(at, "column")
    reset = warnings[warnings["column"] == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    assert len(reset) == 1 and "6" in str(reset.iloc[0].to_dict())
    at.switch_page("pages/telemetry.py").run()
    at.slider(key="win").set_value((datetime(2024, 5, 10, 12, 0), datetime(2024, 5, 10, 12, 4)))
    at.run()
    assert not at.exception
    (row,) = table_with(at, "energy_counter_j").to_dict("records")
    assert row["energy_counter_j"] == 63_000.0 and row["energy_power_j"] == 72_000.0
    assert row["counter_resets"] == 1
    assert any("1 reset(s)" in c.value for c in at.caption)


def test_case_42_telemetry_page_energy_from_measured_spans(app_env):
    """Issue 27 kind 2: the 598 s logging gap is named on the page and not integrated: 720 J
    over 14:00:00-14:10:02, never 108,360 J; the ingest report names the gap's line."""
    at = upload(new_app().run(), "gap.csv", case_bytes("42-nvidia-smi-logging-gap.csv"))
    warned = table_with(at, "warning")
    gap = warned[warned["warning"].str.contains("logging gap")]
    assert gap["lines"].tolist() == ["5"]
    assert any(c.value.startswith("Assumed: time zone assumed") for c in at.caption)
    at.switch_page("pages/telemetry.py").run()
    at.slider(key="win").set_value((datetime(2024, 5, 10, 14, 0), datetime(2024, 5, 10, 14, 10, 2)))
    at.run()
    assert not at.exception
    (row,) = table_with(at, "energy_power_j").to_dict("records")
    assert row["energy_power_j"] == 720.0 and row["gaps"] == 1 and row["gap_s"] == 598.0
    assert any("598 s in all" in w.value and "2024-05-10T14:00:02" in w.value for w in at.warning)
    # issue 31 item 8: totals in human units and the axis with its unit
    shown = {m.label: m.value for m in at.metric}
    assert shown["energy, power x time, all GPUs"] == "720 J"
    assert shown["energy, counter, all GPUs"] == "n/a"  # the log has no energy counter
    assert '"power (W)"' in at.get("plotly_chart")[0].proto.spec


NOHEADER = (b"2024/05/10 12:00:00.000, 0, 69.12, 0\n"
            b"2024/05/10 12:00:01.000, 0, [N/A], 97\n"
            b"2024/05/10 12:00:02.000, 0, 412.50, 97\n")


def test_data_page_noheader_nvidia_smi_log_with_and_without_fields(app_env):
    at = upload(new_app().run(), "smi.csv", NOHEADER)
    assert "no header" in at.error[0].value and "fields" in at.error[0].value
    at = upload(at, "smi.csv", NOHEADER, "timestamp,index,power.draw,utilization.gpu")
    assert len(at.success) == 1 and not at.error
    warnings = table_with(at, "column")
    assert "power.draw" in warnings["column"].tolist()


def test_case_35_data_page_refuses_then_places_appended_scrapes(app_env):
    """Issue 27 kind 2: appended scrapes without timestamps are refused at line 9 unless the
    Parse options give the seconds between them; then all three are kept, the interval stated."""
    at = upload(new_app().run(), "dcgm.prom",
                case_bytes("35-dcgm-appended-scrapes-no-timestamps.prom"))
    assert any("line 9" in e.value and "second scrape" in e.value for e in at.error)
    at.number_input(key="scrape_interval_s").set_value(10.0).run()
    at.file_uploader(key=uploader_key(at)).set_value(
        [("dcgm.prom", case_bytes("35-dcgm-appended-scrapes-no-timestamps.prom"), "text/plain")])
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    assert any("6 rows" in s.value for s in at.success)
    assumed = [c.value for c in at.caption if c.value.startswith("Assumed:")]
    assert any("3 appended scrapes" in a and "10 s apart" in a for a in assumed)
