"""Issue 14 item 8: timestamps with an offset (Azure LLM inference 2024 week-long traces write
``+00:00`` with six fraction digits or none) and other ISO 8601 forms are read, in every format
that parses text timestamps, as naive UTC."""

from __future__ import annotations

from datetime import datetime

import polars as pl
import pytest

from analytics.ingest.csvcheck import parse_timestamps
from analytics.ingest.formats import FormatError, parse_file

AZURE_2024 = """TIMESTAMP,ContextTokens,GeneratedTokens
2024-05-10 00:00:00.123456+00:00,4808,10
2024-05-10 00:00:01+00:00,3180,8
2024-05-10 00:00:01.500000+00:00,110,27
2024-05-10 00:00:03+00:00,7,1
"""


def test_azure_2024_offset_and_mixed_fractions(tmp_path):
    path = tmp_path / "AzureLLMInferenceTrace_code_1week.csv"
    path.write_text(AZURE_2024)
    p = parse_file(path)
    assert (p.format, p.table) == ("azure_llm", "requests")
    assert p.frame["ts"].to_list() == [
        datetime(2024, 5, 10, 0, 0, 0, 123456), datetime(2024, 5, 10, 0, 0, 1),
        datetime(2024, 5, 10, 0, 0, 1, 500000), datetime(2024, 5, 10, 0, 0, 3)]
    assert p.frame["prompt_tokens"].sum() == 4808 + 3180 + 110 + 7
    assert p.frame["completion_tokens"].to_list() == [10, 8, 27, 1]


def test_azure_2023_seven_digits_and_other_offsets(tmp_path):
    """2023 release (7 digits, no offset) still reads as UTC; a file mixing Z, T and +02:00 reads
    each value with its own offset."""
    path = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:15:46.1000000,100,1\n"
                    "2023-11-16T18:15:47Z,200,2\n"
                    "2023-11-16 20:15:48.2500000+02:00,300,3\n"
                    "2023-11-16T13:15:49-0500,400,4\n")
    ts = parse_file(path).frame["ts"].to_list()
    assert ts == [datetime(2023, 11, 16, 18, 15, 46, 100000), datetime(2023, 11, 16, 18, 15, 47),
                  datetime(2023, 11, 16, 18, 15, 48, 250000), datetime(2023, 11, 16, 18, 15, 49)]


def test_azure_bad_timestamp_named_with_line(tmp_path):
    path = tmp_path / "AzureLLMInferenceTrace_code_1week.csv"
    path.write_text(AZURE_2024 + "yesterday,1,1\n")
    with pytest.raises(FormatError) as err:
        parse_file(path)
    assert (err.value.line, err.value.column) == (6, "TIMESTAMP")
    assert "ISO 8601" in err.value.reason


def test_canonical_requests_with_offsets(tmp_path):
    """Another format: a canonical requests CSV with T separator, Z, +02:00 and 7 digits."""
    path = tmp_path / "mine.csv"
    path.write_text("ts,prompt_tokens,completion_tokens\n"
                    "2024-05-10T00:00:00.1234567Z,10,1\n"
                    "2024-05-10 02:00:01+02:00,20,2\n"
                    "2024-05-10T00:00:02,30,3\n")
    p = parse_file(path)
    assert p.table == "requests"
    assert p.frame["ts"].to_list() == [datetime(2024, 5, 10, 0, 0, 0, 123456),
                                       datetime(2024, 5, 10, 0, 0, 1),
                                       datetime(2024, 5, 10, 0, 0, 2)]


def test_alibaba_lora_with_offset(tmp_path):
    """A third format: Alibaba GenAI LoRA ``gmt_create`` written with an offset (+08:00)."""
    path = tmp_path / "lora_request_trace.csv"
    path.write_text("gmt_create,predict_type,predict_status,exec_time_seconds\n"
                    "2024-11-16T00:57:50+08:00,TXT_2_IMG,SUCCEED,32.0\n"
                    "2024-11-15 18:16:14+00:00,TXT_2_IMG,FAILED,43.0\n")
    p = parse_file(path)
    assert p.frame["ts"].to_list() == [datetime(2024, 11, 15, 16, 57, 50),
                                       datetime(2024, 11, 15, 18, 16, 14)]
    assert p.frame["gpu_s"].sum() == 75.0


def test_greendcc_carbon_utc_column_with_offset(tmp_path):
    """A fourth: Green-DCC carbon whose ``Datetime (UTC)`` carries ``+00:00`` (as its price files
    do)."""
    path = tmp_path / "DE-LU_2023_hourly.csv"
    path.write_text("Datetime (UTC),Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
                    "Carbon Intensity gCO₂eq/kWh (LCA)\n"
                    "2023-01-01 00:00:00+00:00,DE,300.5,350.5\n"
                    "2023-01-01T01:00:00Z,DE,301.0,351.0\n")
    p = parse_file(path)
    direct = p.frame.filter(pl.col("basis") == "direct")
    assert direct["ts"].to_list() == [datetime(2023, 1, 1, 0), datetime(2023, 1, 1, 1)]
    assert direct["gco2_per_kwh"].to_list() == [300.5, 301.0]


def test_parse_timestamps_offset_rows_fall_back_vectorised():
    """The exact format first, the rows it misses as ISO 8601: mixed shapes in one column."""
    vals = ["2024-05-10 00:00:00.123456+00:00", "2024-05-10 00:00:01+00:00",
            "2024-05-10T00:00:01Z", "2024-05-10 02:00:01.1234567+0200", "2024-05-10 00:00:05",
            "2024-05-10T04:05"]
    f = pl.DataFrame({"__row": range(len(vals)), "T": vals})
    got = parse_timestamps(f, "T", "x", "%Y-%m-%d %H:%M:%S%.f")["ts"].to_list()
    assert got == [datetime(2024, 5, 10, 0, 0, 0, 123456), datetime(2024, 5, 10, 0, 0, 1),
                   datetime(2024, 5, 10, 0, 0, 1), datetime(2024, 5, 10, 0, 0, 1, 123456),
                   datetime(2024, 5, 10, 0, 0, 5), datetime(2024, 5, 10, 4, 5)]
