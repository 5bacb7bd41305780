"""``headroom powersim`` on the staged MIT SuperCloud jobs and BurstGPT per-minute tokens."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import shared
from harness import strict_loads

from analytics import cli, store
from analytics.ingest import files as ingest

# --- the CLI (openb format: see tests/test_openb.py) ---------------------------------

def _cli(capsys, *args) -> tuple[int, dict]:
    rc = cli.main(list(args))
    return rc, strict_loads(capsys.readouterr().out)


def test_cli_powersim_sweep_json(tmp_path, capsys):
    db = tmp_path / "p.duckdb"
    con = store.connect(db)
    files = [shared("mit_supercloud/slurm-log-queueing-clean.csv"),
             shared("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")]
    ingest.ingest_files(con, [ingest.FileIn(p, p.name) for p in files])
    con.close()
    rc, doc = _cli(capsys, "--db", str(db), "powersim", "--inference-share", "0.3",
                   "--utilization", "0.7", "--sweep", "--days", "2", "--warmup-days", "1",
                   "--replications", "1", "--gpus", "128")
    assert rc == 0
    assert set(doc["ramp_p50"]) == {"1min", "5min", "15min"}
    assert 0 < doc["cv"] < 5 and all(0 <= v < 2 for v in doc["ramp_p50"].values())
    assert doc["scenario"]["inference_share"] == 0.3 and doc["scenario"]["utilization"] == 0.7
    sweep = pd.DataFrame(doc["sweep"])
    assert sorted(sweep["utilization"].unique()) == [0.5, 0.8]
    assert sweep.groupby("utilization")["inference_share"].nunique().min() >= 9
    assert sweep[["cv", "ramp_1min", "ramp_5min", "ramp_15min"]].notna().all().all()
    batch_only = sweep[sweep["inference_share"] == 0.0]
    assert (batch_only["inference_shortfall"] == 0).all()
    assert set(doc["shape"]) == {"0.5", "0.8"}
    assert doc["inputs"]["jobs"] == "slurm-log-queueing-clean"
    assert doc["inputs"]["inference"] == "burstgpt1_week1_per_minute_tps"
    assert doc["synthetic"] is False and doc["inputs"]["clock_offset_h"] == -5.0
    # the scenario alone is deterministic under --seed
    rc2, again = _cli(capsys, "--db", str(db), "powersim", "--inference-share", "0.3",
                      "--utilization", "0.7", "--days", "2", "--warmup-days", "1", "--gpus",
                      "128")
    assert rc2 == 0 and again["cv"] == doc["cv"] and again["sweep"] == []


def test_cli_powersim_without_jobs_says_how_to_add_them(tmp_path, capsys):
    rc, doc = _cli(capsys, "--db", str(tmp_path / "e.duckdb"), "powersim")
    assert rc == 2 and "no job trace" in doc["error"] and "headroom ingest" in doc["error"]
    with pytest.raises(SystemExit):
        cli.main(["--db", str(tmp_path / "e.duckdb"), "powersim", "--inference-share", "1.5"])
