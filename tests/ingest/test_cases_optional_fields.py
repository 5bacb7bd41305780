"""Issue 14 item 14: optional fields missing from a request trace are NULL with a note naming
the line (never 0, never a rejected file), and the demand grid says how many requests had
unknown tokens (their known tokens counted, the target a lower bound there)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from datetime import datetime, timedelta

import pytest
from conftest import REPO, SHARED_DATA
from harness import missing

from analytics import store
from analytics.config import DEFAULT_T0, Weights
from analytics.ingest import files as ingest
from analytics.ingest.formats import parse_file
from analytics.services import demand

CASES = SHARED_DATA.parent / "cases"
T0 = DEFAULT_T0.replace(tzinfo=None)


def case(name: str):
    path = CASES / name
    if not path.exists():
        missing(path)
    return path


def note(parsed, column: str, text: str):
    found = [w for w in parsed.warnings if getattr(w, "column", None) == column and text in w]
    assert len(found) == 1, parsed.warnings
    return found[0]


def test_case_13_mooncake_optional_keys(con):
    path = case("13-mooncake-optional-fields.jsonl")
    p = parse_file(path)
    f = p.frame
    assert (p.format, f.height) == ("mooncake", 4)  # line 4 (no hash_ids) accepted
    offsets = [(t - T0).total_seconds() for t in f["ts"].to_list()]
    assert offsets == [0.0, 0.25, 0.60, 0.90]
    assert int(f["prompt_tokens"].sum()) == 2120
    assert f["completion_tokens"].to_list() == [50, 8, None, 12]  # NULL, never 0
    out = note(p, "output_length", "no output_length")
    assert out.lines == (3,) and out.count == 1
    assert "known output 70 tokens over 3 rows" in out
    blocks = note(p, "hash_ids", "ceil(input_length / 512)")
    assert blocks.lines == (2,)  # 20 tokens are 1 block of 512, not 2 hash ids
    assert note(p, "hash_ids", "no hash_ids").lines == (4,)
    # the store keeps the NULL; the grid counts known tokens and says how many were unknown
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    rows = store.dataset_rows(con, "13-mooncake-optional-fields")
    assert rows["completion_tokens"].isna().tolist() == [False, False, True, False]
    g = demand.demand_grid(con, "13-mooncake-optional-fields", "10s", Weights(1.0, 2.0))
    assert (len(g), float(g["target"].sum())) == (1, 2120 + 2 * 70)
    assert float(g["tokens"].sum()) == 2190.0
    assert int(g["unknown_tokens"].sum()) == 1
    doc = demand.grid_document(con, demand.GridRequest.of("13-mooncake-optional-fields", "10s"))
    assert (doc["unknown_token_requests"], doc["unknown_token_bins"]) == (1, 1)
    assert "lower bound" in doc["note"]
    assert doc["mean_target"] == 2190.0


def test_case_13_through_the_cli_report(tmp_path):
    path = case("13-mooncake-optional-fields.jsonl")
    db = tmp_path / "h.duckdb"
    run = subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), "ingest",
                          str(path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)[0]
    assert (doc["status"], doc["rows"]) == ("ingested", 4)
    by_col = {(w["column"], tuple(w["lines"])) for w in doc["warnings"] if w["column"]}
    assert {("output_length", (3,)), ("hash_ids", (2,)), ("hash_ids", (4,))} <= by_col
    grid = subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), "grid",
                           "13-mooncake-optional-fields", "--bin", "10s"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert grid.returncode == 0, grid.stderr
    g = json.loads(grid.stdout)
    assert g["unknown_token_requests"] == 1 and "lower bound" in g["note"]


def test_mooncake_gzip_null_output_and_no_hash_ids(tmp_path):
    lines = [{"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [7, 8]},
             {"timestamp": 100, "input_length": 1025, "output_length": None, "hash_ids": [7, 8, 9]},
             {"timestamp": 200, "input_length": 513, "output_length": 3}]
    path = tmp_path / "trace.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(json.dumps(r) for r in lines).encode()))
    p = parse_file(path)
    assert p.frame["completion_tokens"].to_list() == [5, None, 3]
    assert note(p, "output_length", "known output 8 tokens over 2 rows").lines == (2,)
    assert note(p, "hash_ids", "no hash_ids").lines == (3,)
    # 1024 tokens = 2 blocks, 1025 tokens = 3 blocks: both consistent, no block note
    assert not [w for w in p.warnings if "ceil(input_length" in w]


def test_azure_empty_generated_tokens_cell(tmp_path, con):
    csv = tmp_path / "azure_edited.csv"
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                   "2023-11-16 18:15:46.1000000,380,40\n"
                   "2023-11-16 18:15:50.2500000,410,\n"
                   "2023-11-16 18:16:02.3300000,1200,20\n")
    p = parse_file(csv)
    assert p.frame["completion_tokens"].to_list() == [40, None, 20]
    assert note(p, "GeneratedTokens", "empty GeneratedTokens").lines == (3,)
    ingest.ingest_files(con, [ingest.FileIn(csv, csv.name)])
    g = demand.demand_grid(con, "azure_edited", "1min")
    assert float(g["target"].sum()) == 380 + 40 + 410 + 1200 + 20
    assert int(g["unknown_tokens"].sum()) == 1


def test_canonical_requests_empty_completion_cell(tmp_path, con):
    path = tmp_path / "own_requests.csv"
    start = datetime(2024, 1, 1)
    rows = [(start + timedelta(minutes=i)).isoformat() for i in range(3)]
    path.write_text("ts,prompt_tokens,completion_tokens\n"
                    f"{rows[0]},100,10\n{rows[1]},200,\n{rows[2]},,30\n")
    p = parse_file(path)
    assert p.format == "canonical"
    assert p.frame["prompt_tokens"].to_list() == [100, 200, None]
    assert p.frame["completion_tokens"].to_list() == [10, None, 30]
    assert note(p, "completion_tokens", "empty completion_tokens").lines == (3,)
    assert note(p, "prompt_tokens", "empty prompt_tokens").lines == (4,)
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    doc = demand.grid_document(con, demand.GridRequest.of("own_requests", "1min"))
    assert doc["unknown_token_requests"] == 2
    assert doc["mean_target"] == pytest.approx((110 + 200 + 30) / 3)


def test_burstgpt_v3_empty_session_id_noted(tmp_path):
    path = tmp_path / "BurstGPT_3_own.csv"
    path.write_text(
        "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,"
        "Log Type\n"
        "5.0,s-1,43,GPT-4,906,446,1352,Conversation log\n"
        "6.0,,21,GPT-4,264,171,435,API log\n"
        "7.0,,,ChatGPT,36,29,65,API log\n")
    p = parse_file(path)
    assert p.frame["session_id"].to_list() == ["s-1", None, None]
    assert p.frame["latency_s"].to_list() == [43.0, 21.0, None]
    sess = note(p, "Session ID", "empty Session ID")
    assert (sess.lines, sess.count) == ((3, 4), 2)
    assert note(p, "Elapsed time", "empty Elapsed time").lines == (4,)


def test_serving_trace_counts_requests_without_a_completion_count(con):
    path = case("13-mooncake-optional-fields.jsonl")
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    from analytics.services import serving

    arrivals = serving.trace(con, "13-mooncake-optional-fields")
    assert arrivals["output"].tolist() == [50, 8, 1, 12]  # the unknown one at the minimum
    assert arrivals.attrs["unknown_tokens"] == 1  # ... and counted, for the comparison's notes
    assert serving.trace(con, "13-mooncake-optional-fields", 0.5).attrs["unknown_tokens"] == 0
