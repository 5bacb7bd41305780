"""The headroom CLI: JSON documents and exit codes as in DESIGN.md."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO, shared
from harness import strict_loads


def _cli(db, *args):
    proc = subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), *args],
                          capture_output=True, text=True, cwd=REPO)
    return proc.returncode, proc.stdout, proc.stderr


def test_ingest_datasets_grid_roundtrip(tmp_path):
    db = tmp_path / "cli.duckdb"
    conv = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
    minute = shared("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")
    rc, out, err = _cli(db, "ingest", str(conv), str(minute))
    assert rc == 0, err
    doc = strict_loads(out)
    assert [(d["dataset"], d["rows"], d["status"]) for d in doc] == [
        ("AzureLLMInferenceTrace_conv", 19366, "ingested"),
        ("burstgpt1_week1_per_minute_tps", 6366, "ingested"),
    ]
    rc, out, _ = _cli(db, "ingest", str(conv))
    assert rc == 0 and strict_loads(out)[0]["status"] == "duplicate"

    rc, out, _ = _cli(db, "datasets")
    names = {d["name"]: d for d in strict_loads(out)}
    assert names["AzureLLMInferenceTrace_conv"]["rows"] == 19366
    assert names["AzureLLMInferenceTrace_conv"]["synthetic"] is False

    rc, out, _ = _cli(db, "grid", "AzureLLMInferenceTrace_conv", "--bin", "5min")
    g = strict_loads(out)
    assert (g["bins"], g["start"], g["end"], g["zero_bins"]) == (
        12, "2023-11-16T18:15:00", "2023-11-16T19:10:00", 0)
    assert g["mean_target"] * 12 == 26_450_535

    rc, out, _ = _cli(db, "grid", "burstgpt1_week1_per_minute_tps", "--bin", "5min")
    assert strict_loads(out)["bins"] == 2016


def test_bad_input_exit_codes(tmp_path):
    db = tmp_path / "cli.duckdb"
    rc, out, err = _cli(db, "grid", "nope")
    assert rc == 2 and "no dataset named 'nope'" in err
    assert "error" in strict_loads(out)
    rc, _, err = _cli(db, "ingest", str(tmp_path / "missing.csv"))
    assert rc == 2 and "no such file" in err
    minute = shared("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")
    _cli(db, "ingest", str(minute))
    rc, _, err = _cli(db, "grid", "burstgpt1_week1_per_minute_tps", "--bin", "30s")
    assert rc == 2 and "finer than" in err
    rc, _, err = _cli(db, "pull", "no_such_dataset")
    assert rc == 2 and "unknown dataset" in err


def test_ingest_with_t0_and_name(tmp_path):
    db = tmp_path / "cli.duckdb"
    head = shared("burstgpt/BurstGPT_1_head400.csv")
    rc, out, err = _cli(db, "ingest", str(head), "--name", "bg", "--t0", "2024-06-03T00:00:00")
    assert rc == 0, err
    rc, out, _ = _cli(db, "datasets")
    (d,) = strict_loads(out)
    assert d["name"] == "bg" and d["ts_min"] == "2024-06-03T00:00:05"
