"""Issue 27 on the round-3 case files of ../shared/cases and on inputs of the same kinds that
these tests write for the other formats.

Kind 1, a variant read with the wrong column: every stored field names the column it came from
(``Parsed.sources``, the ingest report, ``summary``); a known alternative column is read.
Kind 2, time invented or bridged: a time headroom assumes is stated (``Parsed.assumptions``);
energy comes from measured spans only. Kind 3, a refusal that misdescribes the file.
"""

from __future__ import annotations

import gzip
import json

import pytest
from harness import case_file

from analytics import cli
from analytics.config import ParseOptions
from analytics.ingest.formats import FormatError, parse_file
from analytics.schema import Note


def run_cli(capsys, *argv) -> tuple[int, object]:
    rc = cli.main([str(a) for a in argv])
    return rc, json.loads(capsys.readouterr().out)


def ingest(capsys, db, path, *flags) -> dict:
    rc, doc = run_cli(capsys, "--db", db, "ingest", path, *flags)
    assert rc == 0, doc
    return doc[0]


def notes(parsed, word: str) -> list[Note]:
    return [w for w in parsed.warnings if isinstance(w, Note) and word in w.message]


# ------------------------------------------------------------------ case 33: AllocGRES (Slurm < 20.11)
def test_case_33_allocgres_counts_gpus_and_says_which_column(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    rep = ingest(capsys, db, case_file("33-sacct-allocgres-legacy.txt"))
    assert rep["sources"]["n_gpus"] == "AllocGRES"
    assert any("read as UTC" in a for a in rep["assumptions"])  # no --tz: stated, not silent
    pending = [w for w in rep["warnings"] if w["column"] == "AllocGRES"]
    assert pending and pending[0]["lines"] == [6]  # job 9204: 8 requested, none allocated
    rc, summary = run_cli(capsys, "--db", db, "summary", rep["dataset"])
    assert rc == 0
    assert summary["gpus_per_job"] == {"0": 2, "2": 1, "4": 1}
    assert summary["gpu_hours"] == pytest.approx(6.0)  # 9201 2 GPUs x 2 h + 9202 4 x 0.5 h
    assert summary["sources"]["n_gpus"] == "AllocGRES"
    assert summary["assumptions"] == rep["assumptions"]
    frame = parse_file(case_file("33-sacct-allocgres-legacy.txt")).frame
    assert frame["n_gpus"].to_list() == [2, 4, 0, 0]
    assert frame["gpu_kind"].to_list() == [None, "tesla", None, None]


def test_gres_with_index_suffix_and_reqgres_only(tmp_path):
    """``gpu:tesla:4(IDX:0-3)`` (what sacct prints for an allocation) and a file with only
    ``ReqGRES`` (then the request is all there is, and the source says so)."""
    path = tmp_path / "gres.txt"
    path.write_text("JobID|Submit|Start|End|State|AllocGRES\n"
                    "1|2019-01-01T00:00:00|2019-01-01T00:00:00|2019-01-01T01:00:00|COMPLETED|"
                    "gpu:tesla:4(IDX:0-3)\n"
                    "2|2019-01-01T00:00:00|2019-01-01T00:00:00|2019-01-01T01:00:00|COMPLETED|"
                    "craynetwork:1,gpu:2\n")
    p = parse_file(path)
    assert p.frame["n_gpus"].to_list() == [4, 2]
    path.write_text("JobID|Submit|State|ReqGRES\n1|2019-01-01T00:00:00|PENDING|gpu:v100:3\n")
    p = parse_file(path)
    assert p.frame["n_gpus"].to_list() == [3] and p.sources["n_gpus"] == "ReqGRES"
    path.write_text("JobID|Submit|State|AllocGRES\n1|2019-01-01T00:00:00|RUNNING|gpu:x\n")
    with pytest.raises(FormatError) as exc:
        parse_file(path)
    assert (exc.value.line, exc.value.column) == (2, "AllocGRES")


def test_sacct_elapsedraw_and_epoch_times(tmp_path):
    """``ElapsedRaw`` (whole seconds) instead of ``Elapsed``, and ``SLURM_TIME_FORMAT=%s``
    epoch-second times: read, never "no known format"; epoch times are UTC (no --tz)."""
    path = tmp_path / "raw.txt"
    path.write_text("JobID|State|ElapsedRaw|AllocTRES\n"
                    "1|COMPLETED|7200|cpu=8,gres/gpu=2\n2|COMPLETED|90|gres/gpu:h100=1\n")
    p = parse_file(path)
    assert p.format == "slurm_sacct"
    assert p.frame["elapsed_s"].to_list() == [7200.0, 90.0]
    assert p.sources["elapsed_s"] == "ElapsedRaw"
    path.write_text("JobID|Submit|Start|End|State|AllocTRES\n"
                    "7|1714557600|1714557605|1714561205|COMPLETED|gres/gpu=4\n")
    p = parse_file(path, opts=ParseOptions(tz="America/New_York"))
    assert str(p.frame["start_ts"][0]) == "2024-05-01 10:00:05"  # UTC, not shifted by --tz
    assert p.assumptions == ()  # nothing assumed: epoch seconds carry their zone
    assert any("not applied" in str(w) for w in p.warnings)
    path.write_text("JobID|Submit|Start|End|State|AllocTRES\n"
                    "7|1714557600|2024-05-01T10:00:05|1714561205|COMPLETED|gres/gpu=4\n")
    with pytest.raises(FormatError) as exc:
        parse_file(path)
    assert (exc.value.line, exc.value.column) == (2, "Start")
    assert "mixes epoch-second times (line 2, Submit) and date-times (line 2, Start)" in \
        exc.value.reason


# ------------------------------------------------------------------ case 35: appended DCGM scrapes
def test_case_35_appended_scrapes_refused_at_line_9_without_an_interval(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    rc, doc = run_cli(capsys, "--db", db, "ingest",
                      case_file("35-dcgm-appended-scrapes-no-timestamps.prom"))
    assert rc == 2
    assert doc["detail"]["line"] == 9 and "second scrape" in doc["detail"]["reason"]
    assert "--scrape-interval-s" in doc["detail"]["reason"]


def test_case_35_appended_scrapes_kept_in_order_with_the_interval_stated(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    rep = ingest(capsys, db, case_file("35-dcgm-appended-scrapes-no-timestamps.prom"),
                 "--scrape-interval-s", "10")
    assert rep["rows"] == 6
    assert not [w for w in rep["warnings"] if "twice" in w["message"]]  # one Hostname: no such hint
    assumed = " ".join(rep["assumptions"])
    assert "t0 = 2023-01-02T00:00:00Z" in assumed and "10 s apart" in assumed
    assert "lines 1, 9, 17" in assumed
    p = parse_file(case_file("35-dcgm-appended-scrapes-no-timestamps.prom"),
                   opts=ParseOptions(scrape_interval_s=10))
    f = p.frame.sort("gpu_id", "ts")
    g0, g1 = f.filter(f["gpu_id"] == 0), f.filter(f["gpu_id"] == 1)
    assert g0["power_w"].to_list() == [300.0, 310.0, 320.0] and g0["power_w"].mean() == 310.0
    assert g0["gpu_util_pct"].to_list() == [97.0, 98.0, 99.0]
    assert g1["power_w"].to_list() == [100.0, 104.0, 108.0] and g1["power_w"].mean() == 104.0
    assert [str(t) for t in g0["ts"]] == ["2023-01-02 00:00:00", "2023-01-02 00:00:10",
                                         "2023-01-02 00:00:20"]
    assert p.sources["host"] == "Hostname label"
    rc, summary = run_cli(capsys, "--db", db, "summary", rep["dataset"])
    assert summary["assumptions"] == rep["assumptions"]


def test_one_scrape_without_timestamps_states_its_start_time(tmp_path):
    text = case_file("35-dcgm-appended-scrapes-no-timestamps.prom").read_text().splitlines()
    path = tmp_path / "one.prom"
    path.write_text("\n".join(text[:8]) + "\n")
    p = parse_file(path)
    assert p.frame.height == 2
    assert p.assumptions and "start time assumed" in p.assumptions[0]


def test_openmetrics_seconds_with_a_fraction_are_read(tmp_path):
    """``promtool tsdb dump-openmetrics``: timestamps in seconds with a fraction, ``# EOF``."""
    path = tmp_path / "dump.txt"
    path.write_text(
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n1",UUID="GPU-a"} 300.5 1715342400.123\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n1",UUID="GPU-a"} 301.5 1715342410.5\n'
        "# EOF\n")
    p = parse_file(path)
    assert [str(t) for t in p.frame["ts"]] == ["2024-05-10 12:00:00.123000",
                                               "2024-05-10 12:00:10.500000"]
    assert "OpenMetrics" in p.sources["ts"] and p.assumptions == ()


# ------------------------------------------------------------------ case 37: power.draw.average
def test_case_37_power_from_the_average_column(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    rep = ingest(capsys, db, case_file("37-nvidia-smi-power-average-instant.csv"))
    assert rep["sources"]["power_w"] == "power.draw.average [W]"
    assert any("not power.draw.instant" in w["message"] for w in rep["warnings"])
    p = parse_file(case_file("37-nvidia-smi-power-average-instant.csv"))
    f = p.frame.sort("gpu_id", "ts")
    g0, g1 = f.filter(f["gpu_id"] == 0), f.filter(f["gpu_id"] == 1)
    assert g0["power_w"].to_list() == [412.31, 415.02]
    assert g0["power_w"].mean() == pytest.approx(413.665)
    assert g1["power_w"].mean() == pytest.approx(71.46)
    assert g0["throttle_reasons"].to_list() == [4, 0] and g1["throttle_reasons"].to_list() == [1, 1]
    rc, summary = run_cli(capsys, "--db", db, "summary", rep["dataset"])
    assert summary["sources"]["power_w"] == "power.draw.average [W]"


def test_nvidia_smi_error_line_loses_only_that_gpus_row(tmp_path):
    path = tmp_path / "smi.csv"
    path.write_text("timestamp, index, power.draw [W]\n"
                    "2024/05/10 14:00:00.000, 0, 300.00 W\n"
                    "2024/05/10 14:00:00.000, 1, 100.00 W\n"
                    "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n"
                    "2024/05/10 14:00:01.000, 1, 101.00 W\n")
    p = parse_file(path)
    assert p.frame.height == 3
    assert list(notes(p, "nvidia-smi error message")[0].lines) == [4]


# ------------------------------------------------------------------ case 41: vllm failed requests
def test_case_41_failed_requests_kept_as_count_and_share(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    rep = ingest(capsys, db, case_file("41-vllm-bench-failed-requests.jsonl"))
    fail = [w for w in rep["warnings"] if w["column"] == "failed"]
    assert [w["lines"] for w in fail] == [[1], [2]]
    assert "2 of 200" in fail[0]["message"] and "kept usable" in fail[0]["message"]
    assert "74 of 200" in fail[1]["message"] and "flagged" in fail[1]["message"]
    f = parse_file(case_file("41-vllm-bench-failed-requests.jsonl")).frame
    one, two = f.row(0, named=True), f.row(1, named=True)
    assert (one["failed_requests"], one["failed_share"], one["failed"]) == (2, 0.01, False)
    assert (one["concurrency"], one["throughput_tok_s"], one["ttft_ms"], one["itl_ms"]) == \
        (32.0, 818.9, 95.1, 36.2)
    assert one["latency_s"] == pytest.approx(9.3304)
    assert (two["failed_requests"], two["failed_share"], two["failed"]) == (74, 0.37, True)
    assert two["throughput_tok_s"] == 537.6
    rc, summary = run_cli(capsys, "--db", db, "summary", rep["dataset"])
    assert (summary["runs_with_failed_requests"], summary["flagged_failed_runs"]) == (2, 1)
    assert summary["sources"]["failed_requests"] == "failed"


def test_advisor_keeps_the_lightly_failing_run():
    from analytics.advisor.model import prepare

    f = parse_file(case_file("41-vllm-bench-failed-requests.jsonl")).frame.to_pandas()
    kept = prepare(f)
    assert kept["failed_requests"].tolist() == [2]


# ------------------------------------------------------------------ case 42: logging gap energy
def test_case_42_energy_from_measured_spans_and_the_gap_named(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    rep = ingest(capsys, db, case_file("42-nvidia-smi-logging-gap.csv"))
    gap = [w for w in rep["warnings"] if "logging gap" in w["message"]]
    assert gap and gap[0]["lines"] == [5] and "598 s" in gap[0]["message"]
    rc, doc = run_cli(capsys, "--db", db, "telemetry", "summary", rep["dataset"],
                      "--start", "2024-05-10T14:00:00", "--end", "2024-05-10T14:10:02")
    assert rc == 0
    gpu = doc["gpus"][0]
    assert gpu["energy_power_j"] == pytest.approx(720.0)  # 300 W x 2 s + 60 W x 2 s
    assert (gpu["gaps"], gpu["gap_s"], gpu["measured_s"]) == (1, 598.0, 4.0)
    assert (gpu["first_gap_start"], gpu["first_gap_end"]) == ("2024-05-10T14:00:02",
                                                              "2024-05-10T14:10:00")


def test_dcgm_gap_is_named_too(tmp_path):
    """The same kind on the other telemetry format: a DCGM scrape series with a hole."""
    lines = [f'DCGM_FI_DEV_POWER_USAGE{{gpu="0",Hostname="n"}} 200 {1715342400000 + k * 1000}'
             for k in (0, 1, 2, 3, 900, 901)]
    path = tmp_path / "gap.prom"
    path.write_text("\n".join(lines) + "\n")
    p = parse_file(path)
    assert list(notes(p, "logging gap")[0].lines) == [5]


# ------------------------------------------------------------------ case 44: xlsx workbook
def test_case_44_xlsx_refused_by_name(tmp_path, capsys):
    rc, doc = run_cli(capsys, "--db", tmp_path / "s.duckdb", "ingest",
                      case_file("44-excel-xlsx-azure-trace.xlsx"))
    assert rc == 2
    assert doc["detail"]["reason"].startswith("Excel workbook (.xlsx)")
    assert "CSV UTF-8" in doc["detail"]["reason"] and "binary" not in doc["detail"]["reason"]


def test_other_containers_are_named(tmp_path):
    import zipfile

    zpath = tmp_path / "trace.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("trace.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n")
    with pytest.raises(FormatError, match="ZIP archive"):
        parse_file(zpath)
    xls = tmp_path / "old.xls"
    xls.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504)
    with pytest.raises(FormatError, match=r"Excel 97-2003 workbook \(\.xls"):
        parse_file(xls)
    gz = tmp_path / "book.xlsx.gz"
    gz.write_bytes(gzip.compress(case_file("44-excel-xlsx-azure-trace.xlsx").read_bytes()))
    with pytest.raises(FormatError, match=r"Excel workbook \(\.xlsx\)"):
        parse_file(gz)


# ------------------------------------------------------------------ the same kinds, other formats
def test_postgresql_copy_hour_only_offsets(tmp_path):
    """PostgreSQL ``COPY ... CSV`` writes timestamptz as ``2024-03-10 12:00:00.5-05``: an
    hour-only offset and 0-2 fraction digits, valid ISO 8601 (issue 27 kind 2)."""
    path = tmp_path / "pg.csv"
    path.write_text("ts,prompt_tokens,completion_tokens\n"
                    "2024-03-10 12:00:00-05,10,20\n2024-03-10 12:00:01.5-05,10,20\n"
                    "2024-03-10 19:00:02.25+02,1,2\n")
    p = parse_file(path)
    assert [str(t) for t in p.frame["ts"]] == ["2024-03-10 17:00:00", "2024-03-10 17:00:01.500000",
                                               "2024-03-10 17:00:02.250000"]
    assert p.assumptions == ()  # the offsets say the zone: nothing assumed
    azure = tmp_path / "az.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.1-05,418,10\n2023-11-16 18:15:47-05,511,20\n")
    assert [str(t) for t in parse_file(azure).frame["ts"]] == ["2023-11-16 23:15:46.100000",
                                                               "2023-11-16 23:15:47"]
    naive = tmp_path / "naive.csv"
    naive.write_text("ts,prompt_tokens,completion_tokens\n2024-03-10 12:00:00,1,2\n")
    assert "read as UTC" in parse_file(naive).assumptions[0]


def _epw(tmp_path, hour: int = 1, per_hour: int = 1):
    header = ["LOCATION,San Jose,CA,USA,TMY3,724945,37.37,-121.93,-8.0,15.0",
              "DESIGN CONDITIONS,0", "TYPICAL/EXTREME PERIODS,0", "GROUND TEMPERATURES,0",
              "HOLIDAYS/DAYLIGHT SAVINGS,No,0,0,0", "COMMENTS 1,x", "COMMENTS 2,x",
              f"DATA PERIODS,1,{per_hour},Data,Sunday, 1/ 1,12/31"]
    rec = ["1999", "1", "1", "1", "0", "?9?9?9?9E0?9?9?9?9*9?9?9?9?9?9?9?9?9?9*_*9*9*9?9?9",
           "10.0", "5.0", "70", *(["0"] * 26)]
    rows = []
    for h in (1, 2, hour):
        r = list(rec)
        r[3] = str(h)
        rows.append(",".join(r))
    path = tmp_path / "site.epw"
    path.write_text("\n".join(header + rows) + "\n")
    return path


def test_epw_hour_outside_1_24_and_sub_hourly_are_named(tmp_path):
    p = parse_file(_epw(tmp_path, hour=3))
    assert p.frame.height == 3 and any("year assumed" in a for a in p.assumptions)
    with pytest.raises(FormatError) as exc:
        parse_file(_epw(tmp_path, hour=99))
    assert (exc.value.line, exc.value.column) == (11, "field 4 hour")
    assert "99 is outside 1-24" in exc.value.reason
    with pytest.raises(FormatError) as exc:
        parse_file(_epw(tmp_path, per_hour=4))
    assert (exc.value.line, exc.value.column) == (8, 3)
    assert "sub-hourly EPW (4 records per hour, every 15 min" in exc.value.reason


CARBON_HEADER = ("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO\u2082eq/kWh "
                 "(direct),Carbon Intensity gCO\u2082eq/kWh (LCA)\n")


def test_electricity_maps_yearly_and_monthly_exports_are_named(tmp_path):
    path = tmp_path / "KR_yearly.csv"
    path.write_text(CARBON_HEADER + "".join(f"{y}-01-01 00:00:00,South Korea,South Korea,KR,"
                                            f"{400 + y - 2021},{460 + y - 2021}\n"
                                            for y in (2021, 2022, 2023)))
    with pytest.raises(FormatError) as exc:
        parse_file(path)
    assert exc.value.line == 3 and exc.value.reason.startswith("a yearly series")
    path.write_text(CARBON_HEADER + "".join(f"2023-{m:02d}-01 00:00:00,South Korea,South Korea,"
                                            f"KR,400,460\n" for m in (1, 2, 3)))
    with pytest.raises(FormatError, match="a monthly series"):
        parse_file(path)
    prices = tmp_path / "X_electricity_prices.csv"
    prices.write_text("Datetime (UTC),Price (USD/MWh)\n2023-01-01 00:00:00+00:00,50\n"
                      "2023-01-01 00:15:00+00:00,51\n2023-01-01 00:30:00+00:00,52\n")
    with pytest.raises(FormatError, match="sub-hourly series .rows 15 min apart"):
        parse_file(prices)


def test_two_carbon_bases_are_never_averaged_together(tmp_path, capsys):
    path = tmp_path / "KR_2023_hourly.csv"
    path.write_text(CARBON_HEADER + "2023-01-01 00:00:00,South Korea,South Korea,KR,400,460\n"
                    "2023-01-01 01:00:00,South Korea,South Korea,KR,405.4,461.47\n"
                    "2023-01-01 02:00:00,South Korea,South Korea,KR,410.8,462.94\n")
    db = tmp_path / "s.duckdb"
    rep = ingest(capsys, db, path)
    rc, summary = run_cli(capsys, "--db", db, "summary", rep["dataset"])
    assert (summary["hours"], summary["bases"], summary["series"]) == (3, 2, 2)
    assert summary["mean_gco2_per_kwh"] is None and summary["mean_gco2_per_kwh_null_reason"]
    by = summary["mean_gco2_per_kwh_by_basis"]
    assert by["LCA"] == pytest.approx(461.47) and by["direct"] == pytest.approx(405.4)
    assert "basis LCA" in summary["sources"]["gco2_per_kwh"]


def test_append_conflict_names_the_line_in_the_file_as_given(tmp_path, capsys):
    """A DCGM file is sorted by time when read: the refusal names the physical line."""
    db = tmp_path / "s.duckdb"
    base = tmp_path / "node.prom"
    base.write_text('DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n"} 200 1715342400000\n'
                    'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n"} 201 1715342401000\n')
    ingest(capsys, db, base)
    more = tmp_path / "more.prom"
    more.write_text('DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n"} 300 1715342403000\n'
                    'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n"} 301 1715342402000\n'
                    'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n"} 999 1715342401000\n')
    rc, doc = run_cli(capsys, "--db", db, "ingest", "--append", "node", more)
    assert rc == 2 and "more.prom: line 3 (" in doc["error"]


def test_streamed_file_names_its_sources_and_start_time():
    from harness import shared

    p = parse_file(shared("burstgpt/BurstGPT_3_slice400.csv"), stream=True)
    assert p.stream is not None
    assert p.sources["latency_s"] == "Elapsed time" and p.sources["ts"] == "Timestamp"
    assert p.assumptions[0].startswith("start time assumed")
    assert parse_file(shared("burstgpt/BurstGPT_3_slice400.csv")).sources == p.sources


def test_dst_jump_read_without_tz_is_a_named_gap_not_bridged(tmp_path, capsys):
    """Clocks go forward (2024-03-31 02:00 -> 03:00 in Europe/Berlin): read without --tz the log
    jumps an hour; that hour is named as a logging gap and not integrated."""
    rows = ["2024/03/31 01:59:58.000", "2024/03/31 01:59:59.000", "2024/03/31 03:00:00.000",
            "2024/03/31 03:00:01.000"]
    path = tmp_path / "dst.csv"
    path.write_text("timestamp, index, power.draw [W]\n"
                    + "".join(f"{t}, 0, 100.00 W\n" for t in rows))
    db = tmp_path / "s.duckdb"
    rep = ingest(capsys, db, path)
    assert [w["lines"] for w in rep["warnings"] if "logging gap" in w["message"]] == [[4]]
    rc, doc = run_cli(capsys, "--db", db, "telemetry", "summary", rep["dataset"],
                      "--start", "2024-03-31T01:59:58", "--end", "2024-03-31T03:00:01")
    gpu = doc["gpus"][0]
    assert gpu["energy_power_j"] == pytest.approx(200.0) and gpu["gap_s"] == 3601.0
