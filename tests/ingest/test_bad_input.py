"""Bad input: every rejection names file, line, column and reason, and the store is unchanged."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest
from conftest import REPO, shared

from analytics import store
from analytics.ingest import files as ingest
from analytics.ingest.formats import FormatError

AZ_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
BG_HEAD = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def _snapshot(con):
    counts = store.table_counts(con)
    ledger = store.list_datasets(con).drop(columns=["ingested_at"]).to_dict("records")
    return counts, ledger, store.data_version(con)


@pytest.fixture
def seeded(con):
    path = shared("azure_llm/AzureLLMInferenceTrace_code.csv")
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    return con


CASES = [
    ("missing_col.csv", AZ_HEAD.replace(",GeneratedTokens", "") + "2023-11-16 18:00:00,1\n",
     1, "GeneratedTokens", "missing column"),
    ("text_tokens.csv", AZ_HEAD + "2023-11-16 18:00:00,1,2\n2023-11-16 18:00:01,abc,2\n",
     3, "ContextTokens", "'abc' is not an integer"),
    ("neg_tokens.csv", BG_HEAD + "5,ChatGPT,10,-2,8,Conversation log\n",
     2, "Response tokens", "negative"),
    ("bad_ts.csv", AZ_HEAD + "2023-11-16 18:00:00,1,2\nyesterday,1,2\n",
     3, "TIMESTAMP", "'yesterday' is not a timestamp"),
    ("backwards.csv", AZ_HEAD + "2023-11-16 18:00:00,1,2\n2023-11-16 18:10:00,1,2\n"
     "2023-11-16 18:05:00,1,2\n", 4, "TIMESTAMP", "goes back 300.000 s"),
    ("empty.csv", "", 1, 1, "empty file"),
    ("empty_cell.csv", AZ_HEAD + "2023-11-16 18:00:00,,2\n", 2, "ContextTokens", "empty value"),
    ("ragged.csv", AZ_HEAD + "2023-11-16 18:00:00,1,2\n2023-11-16 18:00:01,1,2,9\n", 3, None,
     "fields"),
]


@pytest.mark.parametrize(("name", "text", "line", "column", "reason"), CASES,
                         ids=[c[0] for c in CASES])
def test_rejection_names_position_and_store_is_unchanged(seeded, tmp_path, name, text, line,
                                                         column, reason):
    path = tmp_path / name
    path.write_text(text)
    before = _snapshot(seeded)
    with pytest.raises(FormatError) as exc:
        ingest.ingest_files(seeded, [ingest.FileIn(path, name)])
    err = exc.value
    assert err.file == name and err.line == line
    if column is not None:
        assert err.column == column
    if reason:
        assert reason in err.reason
    assert f"{name}: line {line}" in str(err)
    assert _snapshot(seeded) == before


def test_negative_response_tokens_named(seeded, tmp_path):
    path = tmp_path / "neg2.csv"
    path.write_text(BG_HEAD + "5,ChatGPT,10,8,18,Conversation log\n9,ChatGPT,10,-3,7,API log\n")
    with pytest.raises(FormatError) as exc:
        ingest.ingest_files(seeded, [ingest.FileIn(path, path.name)])
    assert (exc.value.line, exc.value.column) == (3, "Response tokens")
    assert "negative" in exc.value.reason


def test_binary_garbage(seeded, tmp_path):
    path = tmp_path / "garbage.csv"
    path.write_bytes(bytes(range(256)) * 40)
    before = _snapshot(seeded)
    with pytest.raises(FormatError) as exc:
        ingest.ingest_files(seeded, [ingest.FileIn(path, path.name)])
    assert exc.value.line == 1 and "binary" in exc.value.reason
    assert _snapshot(seeded) == before


def test_truncated_gzip_names_line(seeded, tmp_path):
    raw = shared("azure_llm/AzureLLMInferenceTrace_conv.csv").read_bytes()
    whole = gzip.compress(raw)
    path = tmp_path / "conv_cut.csv.gz"
    path.write_bytes(whole[: len(whole) // 2])
    before = _snapshot(seeded)
    with pytest.raises(FormatError) as exc:
        ingest.ingest_files(seeded, [ingest.FileIn(path, path.name)])
    assert "truncated" in exc.value.reason
    assert 1000 < exc.value.line < 19_367
    assert _snapshot(seeded) == before


def test_file_over_upload_cap(seeded, tmp_path):
    path = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
    before = _snapshot(seeded)
    with pytest.raises(FormatError) as exc:
        ingest.ingest_files(seeded, [ingest.FileIn(path, path.name)], max_bytes=100_000)
    assert "upload cap" in exc.value.reason
    assert _snapshot(seeded) == before


def test_same_file_twice_is_duplicate_not_error(seeded):
    path = shared("azure_llm/AzureLLMInferenceTrace_code.csv")
    before = _snapshot(seeded)
    res = ingest.ingest_files(seeded, [ingest.FileIn(path, path.name)])
    assert res[0]["status"] == "duplicate" and res[0]["rows"] == 0
    assert _snapshot(seeded) == before


def test_bad_file_in_a_batch_writes_nothing(seeded, tmp_path):
    good = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text(AZ_HEAD + "2023-11-16 18:00:00,1,x\n")
    before = _snapshot(seeded)
    with pytest.raises(FormatError):
        ingest.ingest_files(seeded, [ingest.FileIn(good, good.name), ingest.FileIn(bad, "bad.csv")])
    assert _snapshot(seeded) == before


def test_name_taken_by_other_content_rolls_back(seeded, tmp_path):
    other = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
    before = _snapshot(seeded)
    with pytest.raises(store.NameTaken):
        ingest.ingest_files(seeded, [ingest.FileIn(other, other.name,
                                                   "AzureLLMInferenceTrace_code")])
    assert _snapshot(seeded) == before


def test_cli_exits_2_with_position(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text(AZ_HEAD + "2023-11-16 18:00:00,1,2\n2023-11-16 18:00:01,1,-7\n")
    db = tmp_path / "cli.duckdb"
    proc = subprocess.run(
        [sys.executable, "-m", "analytics.cli", "--db", str(db), "ingest", str(bad)],
        capture_output=True, text=True, cwd=REPO,
    )
    assert proc.returncode == 2
    assert "line 3, column GeneratedTokens" in proc.stderr
    con = store.connect(db)
    assert store.table_counts(con)["datasets"] == 0
    con.close()


BAD_VALUES = [
    ("inf_ts.csv", BG_HEAD + "5,ChatGPT,10,8,18,Conversation log\ninf,ChatGPT,1,1,2,API log\n",
     3, "Timestamp", "not a finite number"),
    ("nan_ts.csv", BG_HEAD + "NaN,ChatGPT,1,1,2,API log\n", 2, "Timestamp", "not a finite"),
    ("huge_ts.csv", BG_HEAD + "1e15,ChatGPT,1,1,2,API log\n", 2, "Timestamp", "ten years"),
    ("wrap.csv", BG_HEAD + "5,ChatGPT,9223372036854775807,1,-9223372036854775808,API log\n",
     2, "Total tokens", "negative"),
    ("header_only.csv", BG_HEAD, 2, 1, "no data rows"),
    ("minute_inf.csv", "t,tps,norm\n0,1.5,0.1\n1,inf,1\n", 3, "tps", "not a finite"),
    ("minute_big_t.csv", "t,tps,norm\n9999999999999999,1.5,0.1\n", 2, "t", "ten years"),
    ("moon_nan.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 2}\n'
     '{"timestamp": NaN, "input_length": 5, "output_length": 2}\n', 2, "timestamp", "range"),
    ("moon_float.jsonl", '{"timestamp": 0, "input_length": 5.7, "output_length": 2}\n', 1,
     "input_length", "whole number"),
]


@pytest.mark.parametrize(("name", "text", "line", "column", "reason"), BAD_VALUES,
                         ids=[c[0] for c in BAD_VALUES])
def test_non_finite_huge_and_empty_values_rejected(seeded, tmp_path, name, text, line, column,
                                                   reason):
    path = tmp_path / name
    path.write_text(text)
    before = _snapshot(seeded)
    with pytest.raises(FormatError) as exc:
        ingest.ingest_files(seeded, [ingest.FileIn(path, name)])
    assert (exc.value.line, exc.value.column) == (line, column)
    assert reason in exc.value.reason
    assert _snapshot(seeded) == before


def test_duplicate_carbon_hour_rejected(tmp_path):
    src = shared("sustaindc_dcrl/CarbonIntensity/CISO_NG_&_avgCI.csv").read_text().splitlines()
    path = tmp_path / "CISODUP_NG_&_avgCI.csv"
    path.write_text("\n".join([*src[:101], src[100], *src[101:]]) + "\n")
    with pytest.raises(FormatError, match="appears twice") as exc:
        from analytics.ingest.formats import parse_file

        parse_file(path)
    assert exc.value.line == 102


def test_non_utf8_byte_deep_in_file_is_located(tmp_path):
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    rows += [f"2023-11-16 18:{i // 60:02d}:{i % 60:02d}.000,{i},1" for i in range(3000)]
    data = ("\n".join(rows) + "\n").encode()
    cut = data.index(b"\n2023-11-16 18:40:00") + 1  # start of line 2402
    bad = data[:cut] + b"2023-11-16 18:40:00.000,1\xff2,1\n" + data[cut:]
    path = tmp_path / "late.csv"
    path.write_bytes(bad)
    from analytics.ingest.formats import parse_file

    with pytest.raises(FormatError) as exc:
        parse_file(path)
    assert (exc.value.line, exc.value.column) == (2402, 2)


def test_bom_is_stripped(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + shared("burstgpt/BurstGPT_1_head400.csv").read_bytes())
    from analytics.ingest.formats import parse_file

    assert parse_file(path).frame.height == 400


def test_cli_rejects_nonsense_options(tmp_path):
    for args in (["capacity", "x", "--scale", "-5"], ["capacity", "x", "--utilisation", "5"],
                 ["grid", "x", "--w-prompt", "-1"], ["dispatch", "x", "--sites", "A",
                                                     "--method", "nope"],
                 ["coldstart", "a", "b", "--k-hours", "0"]):
        proc = subprocess.run([sys.executable, "-m", "analytics.cli", "--db",
                               str(tmp_path / "o.duckdb"), *args], capture_output=True,
                              text=True, cwd=REPO)
        assert proc.returncode == 2, args
        assert "Traceback" not in proc.stderr
