"""Bad input: every rejection names file, line, column and reason, and the store is unchanged."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest
from conftest import REPO, shared

from analytics import ingest, store
from analytics.formats import FormatError

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
     3, "ContextTokens", "'abc' is not a integer"),
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
