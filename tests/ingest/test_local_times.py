"""Issue 14 item 2: local times written without an offset.

The shared case (``22-sacct-dst-local-times.txt``, America/New_York fall-back 2024-11-03) and
inputs of the same kind written here: sacct across a spring-forward gap, sacct in Europe/Berlin,
nvidia-smi logs across both DST changes, a canonical hourly series written in local time.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime

import polars as pl
import pytest
from conftest import REPO, SHARED_DATA
from harness import missing, strict_loads

from analytics import store
from analytics.config import ParseOptions
from analytics.ingest import files as ingest
from analytics.ingest.formats import parse_file
from analytics.services import data as data_service
from analytics.services import power as power_service

CASES = SHARED_DATA.parent / "cases"
NY = "America/New_York"


def case(name: str):
    path = CASES / name
    if not path.exists():
        missing(path)
    return path


def runtimes(frame: pl.DataFrame) -> dict[str, int]:
    out = frame.select("job_id", (pl.col("end_ts") - pl.col("start_ts")).dt.total_seconds())
    return dict(zip(out["job_id"].to_list(), out["end_ts"].to_list(), strict=True))


def notes_of(parsed, column: str | None = None) -> list:
    return [w for w in parsed.warnings if getattr(w, "lines", ())
            and (column is None or w.column == column)]


# ------------------------------------------------------------------ the shared case, with a zone
def test_case_22_with_zone_gives_true_runtimes_and_names_line_3(con):
    path = case("22-sacct-dst-local-times.txt")
    p = parse_file(path, opts=ParseOptions(tz=NY))
    run = runtimes(p.frame)
    assert run.pop("8001") == 1800
    assert run.pop("8002") == 14400
    assert len(run) == 10 and set(run.values()) == {3600}
    assert p.source_tz == NY
    end = notes_of(p, "End")
    assert len(end) == 1 and end[0].lines == (3,) and "later instant" in end[0].message
    assert {n.column for n in notes_of(p)} == {"Submit", "Start", "End"}  # all on line 3
    assert all(n.lines == (3,) for n in notes_of(p))
    # 8001 ran 01:40 EDT -> 01:10 EST: 05:40 -> 06:10 UTC
    row = p.frame.filter(pl.col("job_id") == "8001")
    assert row["start_ts"].item() == datetime(2024, 11, 3, 5, 40)
    assert row["end_ts"].item() == datetime(2024, 11, 3, 6, 10)

    ingest.ingest_files(con, [ingest.FileIn(path, path.name)], opts=ParseOptions(tz=NY))
    ledger = {d["name"]: d for d in data_service.ledger_document(con)}
    assert ledger["22-sacct-dst-local-times"]["source_tz"] == NY
    inputs = power_service.load_inputs(con, "22-sacct-dst-local-times", "synthetic")
    described = power_service.power.describe_inputs(inputs, power_service.power.Scenario())
    assert described["jobs_used"] == 12 and described["left_out_jobs"] == []
    assert described["clock_offset_h"] == -5.0  # EST at the median submit (2024-11-05)


def test_case_22_without_zone_warns_at_line_3_and_power_names_the_dropped_job(con):
    path = case("22-sacct-dst-local-times.txt")
    p = parse_file(path)
    assert p.source_tz is None
    (note,) = notes_of(p)
    assert (note.lines, note.column) == ((3,), "End")
    assert "likely a repeated DST hour" in note.message and "--tz" in note.message
    run = runtimes(p.frame)
    assert run["8001"] == -1800 and run["8002"] == 10800  # what reading local time as UTC gives

    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert data_service.ledger_document(con)[0]["source_tz"] is None
    inputs = power_service.load_inputs(con, "22-sacct-dst-local-times", "synthetic")
    described = power_service.power.describe_inputs(inputs, power_service.power.Scenario())
    assert described["jobs_used"] == 11
    assert described["left_out_jobs_total"] == 1
    (left,) = described["left_out_jobs"]
    assert left["job_id"] == "8001" and left["runtime_s"] == -1800.0
    assert "End before Start" in left["reason"] and "--tz" in left["reason"]
    assert any("1 GPU job(s) left out" in n for n in described["notes"])


# ----------------------------------------------------------------- more inputs of the same kind
SPRING = """JobID|User|Submit|Start|End|State|ExitCode|AllocTRES
9001|ann|2024-03-10T01:00:00|2024-03-10T01:30:00|2024-03-10T02:30:00|COMPLETED|0:0|gres/gpu=1
9002|ann|2024-03-10T01:40:00|2024-03-10T01:50:00|2024-03-10T03:10:00|COMPLETED|0:0|gres/gpu=2
9003|bob|2024-03-10T04:00:00|2024-03-10T04:00:00|2024-03-10T05:00:00|COMPLETED|0:0|gres/gpu=1
"""


def test_sacct_spring_forward_nonexistent_hour_moves_forward(tmp_path):
    path = tmp_path / "spring.txt"
    path.write_text(SPRING)
    p = parse_file(path, opts=ParseOptions(tz=NY))
    # 02:30 does not exist on 2024-03-10 in New York: read with EST (-5) -> 07:30 UTC
    assert p.frame["end_ts"][0] == datetime(2024, 3, 10, 7, 30)
    assert runtimes(p.frame) == {"9001": 3600, "9002": 1200, "9003": 3600}
    (gap,) = notes_of(p)
    assert (gap.lines, gap.column) == ((2,), "End") and "non-existent" in gap.message
    # without a zone the same file reads 3600, 4800, 3600: nothing impossible, no line notes
    assert runtimes(parse_file(path).frame) == {"9001": 3600, "9002": 4800, "9003": 3600}


BERLIN = """JobID|User|Submit|Start|End|State|ExitCode|AllocTRES
7001|eva|2024-10-27T01:30:00|2024-10-27T02:40:00|2024-10-27T02:10:00|COMPLETED|0:0|gres/gpu=4
7002|eva|2024-10-27T01:00:00|2024-10-27T02:20:00|2024-10-27T02:50:00|COMPLETED|0:0|gres/gpu=1
7003|eva|2024-10-26T23:00:00|2024-10-27T00:30:00|2024-10-27T04:30:00|COMPLETED|0:0|gres/gpu=1
"""


def test_sacct_europe_berlin_fall_back(tmp_path):
    path = tmp_path / "berlin.txt"
    path.write_text(BERLIN)
    p = parse_file(path, opts=ParseOptions(tz="Europe/Berlin"))
    # 7001: 02:40 CEST (00:40 UTC) -> 02:10 CET (01:10 UTC); 7002 both in the first pass;
    # 7003 spans the change: 00:30 CEST (22:30 UTC) -> 04:30 CET (03:30 UTC) = 5 h
    assert runtimes(p.frame) == {"7001": 1800, "7002": 1800, "7003": 18000}
    later = [n for n in notes_of(p) if "later instant" in n.message]
    assert len(later) == 1 and later[0].lines == (2,) and later[0].column == "End"
    bad = parse_file(path)
    assert [n.lines for n in notes_of(bad)] == [(2,)]


SMI_FALL = """timestamp, index, power.draw [W]
2024/11/03 01:50:00.000, 0, 100.00 W
2024/11/03 01:50:00.000, 1, 200.00 W
2024/11/03 01:10:00.000, 0, 110.00 W
2024/11/03 01:10:00.000, 1, 210.00 W
2024/11/03 02:10:00.000, 0, 120.00 W
2024/11/03 02:10:00.000, 1, 220.00 W
"""


def test_nvidia_smi_log_across_fall_back(tmp_path):
    path = tmp_path / "node1.csv"
    path.write_text(SMI_FALL)
    p = parse_file(path, opts=ParseOptions(tz=NY))
    gpu0 = p.frame.filter(pl.col("gpu_id") == 0)
    assert gpu0["ts"].to_list() == [datetime(2024, 11, 3, 5, 50), datetime(2024, 11, 3, 6, 10),
                                    datetime(2024, 11, 3, 7, 10)]
    assert p.source_tz == NY
    by_msg = {("later" if "later" in n.message else "earlier"): n.lines for n in notes_of(p)}
    assert by_msg == {"earlier": (2, 3), "later": (4, 5)}
    plain = parse_file(path)
    (note,) = notes_of(plain)
    assert note.lines == (4, 5) and note.column == "timestamp" and "--tz" in note.message


SMI_SPRING = """timestamp, index, power.draw [W]
2024/03/31 01:30:00.000, 0, 100.00 W
2024/03/31 02:30:00.000, 0, 101.00 W
2024/03/31 03:30:00.000, 0, 102.00 W
"""


def test_nvidia_smi_berlin_spring_forward(tmp_path):
    path = tmp_path / "node2.csv"
    path.write_text(SMI_SPRING)
    p = parse_file(path, opts=ParseOptions(tz="Europe/Berlin"))
    # 01:30 CET = 00:30 UTC; 02:30 is skipped -> read with CET = 01:30 UTC; 03:30 CEST = 01:30
    assert p.frame["ts"].to_list() == [datetime(2024, 3, 31, 0, 30), datetime(2024, 3, 31, 1, 30),
                                       datetime(2024, 3, 31, 1, 30)]
    (gap,) = [n for n in notes_of(p) if "non-existent" in n.message]
    assert gap.lines == (3,)
    # 02:30 read forward lands on 03:30's instant: the same (time, GPU) twice is named too
    assert any(n.lines == (3, 4) for n in notes_of(p) if n is not gap)


def test_canonical_hourly_series_in_local_time(tmp_path):
    path = tmp_path / "grid_local.csv"
    path.write_text("site,ts,gco2_per_kwh\n"
                    "DE,2024-10-27 01:00,300\nDE,2024-10-27 02:00,310\n"
                    "DE,2024-10-27 02:00,320\nDE,2024-10-27 03:00,330\n")
    p = parse_file(path, opts=ParseOptions(tz="Europe/Berlin"))
    assert p.frame["ts"].to_list() == [datetime(2024, 10, 26, 23), datetime(2024, 10, 27, 0),
                                       datetime(2024, 10, 27, 1), datetime(2024, 10, 27, 2)]
    assert p.frame["gco2_per_kwh"].to_list() == [300.0, 310.0, 320.0, 330.0]
    plain = parse_file(path)
    assert [n.lines for n in notes_of(plain)] == [(4,)]  # the repeated 02:00


def test_alibaba_lora_local_time_step_back(tmp_path):
    path = tmp_path / "lora_request_trace.csv"
    path.write_text("gmt_create,predict_type,predict_status,exec_time_seconds\n"
                    "2024-11-03 01:59:59,TXT_2_IMG,SUCCEED,1.0\n"
                    "2024-11-03 01:00:01,TXT_2_IMG,SUCCEED,2.0\n")
    p = parse_file(path, opts=ParseOptions(tz=NY))
    assert p.frame["ts"].to_list() == [datetime(2024, 11, 3, 5, 59, 59),
                                       datetime(2024, 11, 3, 6, 0, 1)]
    with pytest.raises(Exception, match="daylight saving"):  # as UTC it goes back 3598 s
        parse_file(path)


def test_zone_on_a_utc_format_is_reported_not_applied(tmp_path):
    path = tmp_path / "AzureLLMInferenceTrace_code.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00+00:00,1,1\n")
    p = parse_file(path, opts=ParseOptions(tz=NY))
    assert p.source_tz is None
    assert p.frame["ts"][0] == datetime(2024, 5, 10)
    assert any(f"time zone {NY} not applied" in w for w in p.warnings)


def test_parse_options_refuse_unknown_zone():
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        ParseOptions(tz="Mars/Olympus")


def test_cli_tz_option(tmp_path):
    db = tmp_path / "cli.duckdb"
    path = tmp_path / "spring.txt"
    path.write_text(SPRING)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), *args],
                              capture_output=True, text=True, cwd=REPO)

    bad = cli("ingest", str(path), "--tz", "Mars/Olympus")
    assert bad.returncode == 2 and "unknown time zone 'Mars/Olympus'" in bad.stderr
    ok = cli("ingest", str(path), "--tz", NY)
    assert ok.returncode == 0, ok.stderr
    doc = strict_loads(ok.stdout)[0]
    assert doc["source_tz"] == NY
    assert any(w["lines"] == [2] and w["column"] == "End" for w in doc["warnings"])
    listed = strict_loads(cli("datasets").stdout)
    assert listed[0]["source_tz"] == NY
    assert store.SCHEMA_VERSION >= 8  # migration 8 added datasets.source_tz


def test_row_rule_later_column_takes_the_second_pass_only_when_needed():
    """Submit 01:50, Start 01:10, End 01:30 on the fall-back day: Submit is the first pass (EDT);
    Start and End can only follow it in the second pass (EST)."""
    from analytics.ingest.localtime import localize_rows, zone_offset_h

    f = pl.DataFrame({"__row": [0], "s": [datetime(2024, 11, 3, 1, 50)],
                      "a": [datetime(2024, 11, 3, 1, 10)], "e": [datetime(2024, 11, 3, 1, 30)]})
    out, notes = localize_rows(f, ["s", "a", "e"], NY)
    assert out.row(0)[1:] == (datetime(2024, 11, 3, 5, 50), datetime(2024, 11, 3, 6, 10),
                              datetime(2024, 11, 3, 6, 30))
    assert sorted(n.column for n in notes if "later" in n.message) == ["a", "e"]
    assert zone_offset_h(NY, datetime(2024, 7, 1)) == -4.0
    assert zone_offset_h("Europe/Berlin", datetime(2024, 1, 1)) == 1.0
