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


def test_cli_powersim_request_groups_json(tmp_path, capsys):
    """Issue 18 items 13-14 in the CLI JSON: ``--inference-model groups`` names the groups and
    their replay validation; metrics carry the realised share, clipped GPU-minutes and the
    batch shortfall; ``--hold offered`` gives back the demand-based scaling."""
    import math

    db = tmp_path / "g.duckdb"
    con = store.connect(db)
    files = [shared("mit_supercloud/slurm-log-queueing-clean.csv"),
             shared("azure_llm/AzureLLMInferenceTrace_code.csv"),
             shared("azure_llm/AzureLLMInferenceTrace_conv.csv")]
    ingest.ingest_files(con, [ingest.FileIn(p, p.name) for p in files])
    con.close()
    args = ("--db", str(db), "powersim", "--inference-model", "groups", "--inference-share",
            "0.5", "--days", "1", "--warmup-days", "0.5", "--gpus", "64")
    rc, doc = _cli(capsys, *args)
    assert rc == 0 and doc["inputs"]["inference_model"] == "groups"
    rm = doc["inputs"]["request_model"]
    assert len(rm["groups"]) == 5 and all(g["alpha"] > 0 for g in rm["groups"])
    assert math.isfinite(rm["validation"]["psd_log10_mad"])
    assert set(rm["validation"]["revealed_capacity_per_min"]) == {"replay", "generated"}
    m = doc["metrics"]
    assert 0 < m["realized_inference_share"] < 1 and m["inference_clipped_gpu_min"] >= 0
    assert 0 <= m["batch_shortfall"] <= 1 and m["inference_target_reached"] is True
    assert doc["scenario"]["hold"] == "served"
    rc, offered = _cli(capsys, *args, "--hold", "offered")
    assert rc == 0 and offered["scenario"]["hold"] == "offered"
    assert offered["metrics"]["realized_inference_share"] <= m["realized_inference_share"]
