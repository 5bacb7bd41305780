"""Issue 14 item 13: UTF-16 text (Excel "Unicode text", PowerShell 5 redirection) is decoded,
never called binary data; UTF-16 without a byte-order mark is refused with "UTF-16 text:
re-save as CSV UTF-8"."""

from __future__ import annotations

import codecs
import gzip
import json
import subprocess
import sys
from datetime import datetime

import polars as pl
import pytest
from conftest import REPO, shared
from harness import case_file

from analytics import store
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError, detect, parse_file

case = case_file  # a file of ../shared/cases


def cli(db, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_case_24_excel_utf16le_azure_export_decoded(con, tmp_path):
    path = case("24-excel-utf16-azure-export.csv")
    assert path.read_bytes()[:2] == b"\xff\xfe"
    p = parse_file(path)
    assert (p.format, p.table) == ("azure_llm", "requests")
    f = p.frame
    assert f.height == 3
    assert int((f["prompt_tokens"] + f["completion_tokens"]).sum()) == 2151
    assert f["ts"][0] == datetime(2023, 11, 16, 18, 15, 46, 100000)
    assert p.warnings[0] == "UTF-16-LE text (byte-order mark) decoded to UTF-8"
    # the CLI: ingested, the decoding said in the report, strict JSON
    run = cli(tmp_path / "h.duckdb", "ingest", str(path))
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)[0]
    assert (doc["status"], doc["rows"], doc["ts_min"]) == ("ingested", 3,
                                                           "2023-11-16T18:15:46.100000")
    assert "UTF-16-LE" in doc["warnings"][0]["message"]
    assert "binary" not in run.stdout + run.stderr


def test_utf16be_burstgpt_gives_the_same_rows_as_utf8(tmp_path):
    src = shared("burstgpt/BurstGPT_1_head400.csv")
    be = tmp_path / "burst_be.csv"
    be.write_bytes(codecs.BOM_UTF16_BE + src.read_text(encoding="utf-8").encode("utf-16-be"))
    assert detect(be).NAME == "burstgpt"
    want, got = parse_file(src), parse_file(be)
    assert got.frame.height == want.frame.height == 400
    assert got.frame.equals(want.frame)
    assert "UTF-16-BE" in got.warnings[0]


def test_gzip_utf16le_sacct_with_crlf(tmp_path):
    src = case("07-sacct-alloctres-typed-gpu.txt")
    text = src.read_text(encoding="utf-8").replace("\r\n", "\n").replace("\n", "\r\n")
    gz = tmp_path / "sacct_ps5.txt.gz"
    gz.write_bytes(gzip.compress(codecs.BOM_UTF16_LE + text.encode("utf-16-le")))
    p = parse_file(gz)
    assert p.format == "slurm_sacct"
    assert p.frame["n_gpus"].to_list() == [1, 1, 2, 8]
    assert float((p.frame["n_gpus"] * p.frame["elapsed_s"]).sum()) / 3600.0 == 196.0


def test_excel_unicode_text_tab_separated_read_as_columns(con, tmp_path):
    # Excel "Unicode text": UTF-16LE, TAB between cells, CRLF; a cell holding a comma stays whole
    path = tmp_path / "azure_tab.txt"
    azure = [["TIMESTAMP", "ContextTokens", "GeneratedTokens"],
             ["2023-11-16 18:15:46.1000000", "380", "40"],
             ["2023-11-16 18:15:50.2500000", "410", "101"]]
    path.write_bytes(codecs.BOM_UTF16_LE + ("\r\n".join("\t".join(r) for r in azure) + "\r\n")
                     .encode("utf-16-le"))
    p = parse_file(path)
    assert p.format == "azure_llm"
    assert p.frame["prompt_tokens"].to_list() == [380, 410]
    assert p.frame["completion_tokens"].to_list() == [40, 101]
    assert "TAB-separated" in p.warnings[0]
    res = ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    assert res[0]["rows"] == 2
    assert store.list_datasets(con)["rows"].tolist() == [2]


def test_utf16_without_bom_refused_with_resave_message(tmp_path):
    path = tmp_path / "nobom.csv"
    path.write_bytes("TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.1,380,40\r\n"
                     .encode("utf-16-le"))
    with pytest.raises(FormatError) as err:
        parse_file(path)
    assert "UTF-16 text: re-save as CSV UTF-8" in str(err.value)
    assert "binary" not in str(err.value)
    run = cli(tmp_path / "h.duckdb", "ingest", str(path))
    assert run.returncode == 2
    assert "UTF-16 text: re-save as CSV UTF-8" in run.stderr


def test_utf16_jsonl_mooncake_decoded(tmp_path):
    lines = ['{"timestamp": 0, "input_length": 100, "output_length": 10}',
             '{"timestamp": 500, "input_length": 200, "output_length": 20}']
    path = tmp_path / "moon16.jsonl"
    path.write_bytes(codecs.BOM_UTF16_LE + ("\n".join(lines) + "\n").encode("utf-16-le"))
    p = parse_file(path)
    assert p.format == "mooncake"
    assert p.frame.select(pl.col("prompt_tokens").sum()).item() == 300


def test_checked_csv_reader_takes_utf16_bytes_and_paths(tmp_path):
    from analytics.ingest.csvcheck import read_csv_checked

    text = "gpu\tpower_w\r\nH100\t650.5\r\nA100\t\r\n"  # Excel "Unicode text": TAB, CRLF
    data = codecs.BOM_UTF16_LE + text.encode("utf-16-le")
    spec = {"gpu": pl.String}
    frame = read_csv_checked(data, "profile.txt", spec, optional={"power_w": pl.Float64})
    assert frame["gpu"].to_list() == ["H100", "A100"]
    assert frame["power_w"].to_list() == [650.5, None]
    path = tmp_path / "profile.txt.gz"
    path.write_bytes(gzip.compress(data))
    again = read_csv_checked(path, "profile.txt.gz", spec, optional={"power_w": pl.Float64})
    assert again.drop("__row").equals(frame.drop("__row"))
    with pytest.raises(FormatError) as err:  # an empty required cell still names its line
        read_csv_checked(data, "profile.txt", {"gpu": pl.String, "power_w": pl.Float64})
    assert (err.value.line, err.value.column) == (3, "power_w")
