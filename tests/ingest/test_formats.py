"""Every format on the real staged files: exact row counts, detection, field meaning."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest
from conftest import shared

from analytics.config import ParseOptions
from analytics.ingest.formats import FormatError, detect, parse_file


@pytest.mark.parametrize(
    ("rel", "fmt", "table", "rows"),
    [
        ("burstgpt/BurstGPT_1_head400.csv", "burstgpt", "requests", 400),
        ("burstgpt/BurstGPT_3_slice400.csv", "burstgpt", "requests", 400),
        ("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv", "burstgpt_minute",
         "demand_series", 6366),
        ("burstgpt/derived/burstgpt1_daily_requests_tokens.csv", "burstgpt_daily",
         "demand_series", 61),
        ("azure_llm/AzureLLMInferenceTrace_code.csv", "azure_llm", "requests", 8819),
        ("azure_llm/AzureLLMInferenceTrace_conv.csv", "azure_llm", "requests", 19366),
        ("mooncake/conversation_trace.jsonl.gz", "mooncake", "requests", 12031),
        ("sustaindc_dcrl/CarbonIntensity/WAAT_NG_&_avgCI.csv", "sustaindc_carbon",
         "carbon_intensity", 8760),
        ("green_dcc/carbon_intensity/GB_2023_hourly.csv.gz", "greendcc_carbon",
         "carbon_intensity", 2 * 8760),
        ("green_dcc/electricity_prices/DE-LU_electricity_prices_2023.csv.gz", "greendcc_prices",
         "prices", 8760),
        ("green_dcc/weather/DE-LU_2023.json.gz", "openmeteo_weather", "weather", 8760),
        ("sustaindc_dcrl/Weather/USA_IL_Chicago.OHare.epw.gz", "epw_weather", "weather", 8760),
    ],
)
def test_real_file_parses_to_exact_rows(rel, fmt, table, rows):
    p = parse_file(shared(rel))
    assert (p.format, p.table, p.frame.height) == (fmt, table, rows)
    assert p.frame["ts"].dtype == pl.Datetime("us")
    assert p.frame["ts"].null_count() == 0


def test_every_sustaindc_carbon_file_has_8760_hourly_rows():
    folder = shared("sustaindc_dcrl/CarbonIntensity")
    files = sorted(folder.glob("*_NG_&_avgCI.csv"))
    assert len(files) == 17
    for f in files:
        p = parse_file(f)
        assert p.frame.height == 8760, f.name
        steps = p.frame["ts"].diff().drop_nulls().dt.total_seconds().unique().to_list()
        assert steps == [3600], f.name
        assert p.frame["basis"].unique().to_list() == ["avg"]


def test_burstgpt_failed_flag_and_relative_timestamps():
    p = parse_file(shared("burstgpt/BurstGPT_1_head400.csv"),
                   opts=ParseOptions(t0=datetime(2024, 3, 4, tzinfo=UTC)))
    f = p.frame
    assert int(f["failed"].sum()) == 17
    assert (f.filter(pl.col("failed"))["completion_tokens"] == 0).all()
    # first row: Timestamp 5 s after t0
    assert f["ts"][0] == datetime(2024, 3, 4, 0, 0, 5)
    assert f["model"].value_counts().sort("model")["count"].to_list() == [320, 80]
    assert any("weekdays are relative" in w for w in p.warnings)


def test_burstgpt_v3_keeps_session_and_latency():
    f = parse_file(shared("burstgpt/BurstGPT_3_slice400.csv")).frame
    assert f["session_id"][0] == "1722ac82-0a46-4bf0-aa08-89794e7a2b3f"
    assert f["latency_s"][0] == 43.0
    assert f["session_id"].null_count() > 0  # API-log rows have no session


def test_burstgpt_aggregates_meaning():
    minute = parse_file(shared("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")).frame
    assert minute["tokens"][0] == pytest.approx(30.1 * 60)
    assert minute["requests"].null_count() == minute.height
    daily = parse_file(shared("burstgpt/derived/burstgpt1_daily_requests_tokens.csv")).frame
    assert int(daily["requests"].sum()) == 1_429_737
    assert daily["tokens"][0] == 2823563


def test_azure_timestamps_keep_microseconds():
    f = parse_file(shared("azure_llm/AzureLLMInferenceTrace_conv.csv")).frame
    assert f["ts"][0] == datetime(2023, 11, 16, 18, 15, 46, 680590)
    assert int(f["prompt_tokens"][0]) == 374 and int(f["completion_tokens"][0]) == 44


def test_sustaindc_empty_first_header_cell_and_site_from_name():
    p = parse_file(shared("sustaindc_dcrl/CarbonIntensity/WAAT_NG_&_avgCI.csv"))
    assert p.frame["site"][0] == "WAAT"
    assert p.frame["gco2_per_kwh"][0] == pytest.approx(57.885814636943586)
    assert p.frame["ts"][0] == datetime(2022, 1, 1)


def test_greendcc_carbon_both_bases():
    f = parse_file(shared("green_dcc/carbon_intensity/GB_2023_hourly.csv.gz")).frame
    assert sorted(f["basis"].unique().to_list()) == ["LCA", "direct"]
    assert f["site"].unique().to_list() == ["GB"]


def test_weather_to_utc():
    om = parse_file(shared("green_dcc/weather/AU-NSW_2023.json.gz")).frame
    assert om["ts"][0] == datetime(2022, 12, 31, 13)  # 2023-01-01T00:00 at UTC+11
    epw = parse_file(shared("sustaindc_dcrl/Weather/USA_AZ_Phoenix-Sky.Harbor.epw.gz")).frame
    assert epw["ts"][0] == datetime(2022, 1, 1, 7)  # hour 1 at UTC-7 starts 07:00 UTC
    assert epw["temp_c"][0] == pytest.approx(8.3)


def test_canonical_csv_and_parquet_roundtrip(tmp_path):
    csv = tmp_path / "mine.csv"
    csv.write_text(
        "ts,model,prompt_tokens,completion_tokens,failed\n"
        "2024-05-10T12:00:00Z,llama,100,20,false\n"
        "2024-05-10 12:00:01.5,llama,50,0,true\n"
    )
    p = parse_file(csv)
    assert (p.format, p.table, p.frame.height) == ("canonical", "requests", 2)
    assert p.frame["failed"].to_list() == [False, True]
    pq = tmp_path / "mine.parquet"
    p.frame.write_parquet(pq)
    q = parse_file(pq)
    assert q.frame.equals(p.frame)


def test_unrecognised_file_names_first_line(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("foo,bar\n1,2\n")
    with pytest.raises(FormatError) as exc:
        detect(f)
    assert exc.value.line == 1 and "foo,bar" in exc.value.reason


def test_alibaba_lora_trace_gpu_seconds_and_no_tokens():
    p = parse_file(shared("alibaba_gpu_traces/v2026_genai/lora_request_trace.csv"))
    f = p.frame
    assert (p.format, p.table, f.height) == ("alibaba_lora", "requests", 26823)
    assert f["prompt_tokens"].null_count() == 26823  # no token counts in this trace
    assert f["gpu_s"].sum() == 768899.0
    assert int(f["failed"].sum()) == 26823 - (24060 + 180 + 2152)  # everything not SUCCEED
    assert f["ts"][0] == datetime(2024, 11, 15, 16, 57, 50)
    assert any("GPU-seconds" in w for w in p.warnings)


def test_mit_supercloud_slurm_jobs():
    p = parse_file(shared("mit_supercloud/slurm-log-queueing-clean.csv"))
    f = p.frame
    assert (p.format, p.table, f.height) == ("mit_supercloud_slurm", "jobs", 9628)
    assert int((f["n_gpus"] > 0).sum()) == 2368
    states = dict(zip(*f["state"].value_counts().sort("state").to_dict(as_series=False).values(),
                      strict=True))
    assert states == {"CANCELLED": 1893, "COMPLETED": 5784, "FAILED": 1077, "NODE_FAIL": 12,
                      "OUT_OF_MEMORY": 21, "TIMEOUT": 841}
    first = f.row(0, named=True)
    assert first["submit_ts"] == datetime(2021, 1, 1, 21, 18, 32)
    assert (first["end_ts"] - first["start_ts"]).total_seconds() == 307


def test_jobs_bad_gpu_count(tmp_path):
    src = shared("mit_supercloud/slurm-log-queueing-clean.csv").read_text().splitlines()
    head, tail = src[3].rsplit('5=20"', 1)  # the second pair is tres_req
    lines = [*src[:3], head + '5=20,1002=x"' + tail, *src[4:10]]
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError) as exc:
        parse_file(path)
    assert (exc.value.line, exc.value.column) == (4, "tres_req")


SACCT = """JobID|User|Submit|Start|End|State|ExitCode|AllocTRES|ReqTRES
4101|alice|2024-05-10T12:00:00|2024-05-10T12:05:00|2024-05-10T14:05:00|COMPLETED|0:0|\
billing=8,cpu=8,gres/gpu:a100=4,mem=64G,node=1|billing=8,cpu=8,gres/gpu=4,mem=64G,node=1
4101.batch||2024-05-10T12:05:00|2024-05-10T12:05:00|2024-05-10T14:05:00|COMPLETED|0:0|\
cpu=8,gres/gpu:a100=4,mem=64G,node=1|
4102|bob|2024-05-10T12:01:00|Unknown|Unknown|CANCELLED by 1001|0:0||\
billing=2,cpu=2,mem=8G,node=1
4103|alice|2024-05-10T12:02:00|2024-05-10T12:03:00|2024-05-10T12:04:00|FAILED|2:0|\
cpu=4,gres/gpu=1,node=1|cpu=4,gres/gpu=1,node=1
"""


def test_sacct_parsable2(tmp_path):
    path = tmp_path / "sacct.txt"
    path.write_text(SACCT)
    p = parse_file(path)
    f = p.frame
    assert (p.format, p.table, f.height) == ("slurm_sacct", "jobs", 3)  # the .batch step skipped
    assert f["n_gpus"].to_list() == [4, 0, 1]
    assert f["gpu_kind"].to_list() == ["a100", None, None]
    assert f["state"].to_list() == ["COMPLETED", "CANCELLED", "FAILED"]
    assert f["exit_code"].to_list() == [0, 0, 2]
    assert f["start_ts"][1] is None
    assert f["user_hash"][0] == f["user_hash"][2] != "alice"
    bad = tmp_path / "bad.txt"
    bad.write_text(SACCT.replace("2024-05-10T12:02:00", "yesterday"))
    with pytest.raises(FormatError) as exc:
        parse_file(bad)
    assert (exc.value.line, exc.value.column) == (5, "Submit")
