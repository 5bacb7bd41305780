"""``headroom powersim`` on the staged MIT SuperCloud jobs and BurstGPT per-minute tokens."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import shared
from harness import seed, strict_loads

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
    # issue 33 (was: ranges only): the CV and ramps are the paper's formulas on the per-minute
    # total power of the same scenario (hybrid power paper, Methods: CV = population sd / mean;
    # the h-minute ramp = median |p(t + h) - p(t)| of power over its mean), recomputed here
    from analytics import power as powersim
    from analytics.services import power as power_service

    con = store.connect(db, read_only=True)
    inputs = power_service.load_inputs(con, None, None, 0)
    con.close()
    scen = powersim.Scenario(inference_share=0.3, utilization=0.7, n_gpus=128, days=2.0,
                             warmup_days=1.0)
    p = power_service.run(inputs, scen, 0)["frame"]["total_power_w"].to_numpy(float)
    assert p.size == 2 * 1440
    assert again["cv"] == pytest.approx(p.std() / p.mean(), abs=1e-9)
    q = p / p.mean()
    for h in (1, 5, 15):
        assert again["ramp_p50"][f"{h}min"] == pytest.approx(
            np.median(np.abs(q[h:] - q[:-h])), abs=1e-9)
    assert again["metrics"]["mean_power_w"] == pytest.approx(p.mean())
    assert again["inputs"]["capped_jobs_total"] == 0  # no job asks for more than 128 GPUs
    # a pool smaller than the trace's largest jobs: they are named, never shrunk silently
    # (issue 27 item 1): the trace has 20 jobs of 16 GPUs (summary: gpus_per_job)
    rc3, small = _cli(capsys, "--db", str(db), "powersim", "--inference-share", "0.3",
                      "--utilization", "0.7", "--days", "1", "--warmup-days", "0.5", "--gpus",
                      "8")
    assert rc3 == 0 and small["inputs"]["capped_jobs_total"] == 20
    assert {j["gpus"] for j in small["inputs"]["capped_jobs"]} == {16.0}
    assert all(j["capped_to_gpus"] == 8 for j in small["inputs"]["capped_jobs"])
    assert any("20 job(s) of the trace ask for more GPUs than the 8-GPU pool" in w
               for w in small["warnings"])


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
    # the sweep key of a groups run names the traces the groups were fitted on (its inference
    # label is a description, not a dataset)
    from types import SimpleNamespace

    from analytics.services import power

    con = store.connect(db, read_only=True)
    fitted = SimpleNamespace(jobs_label="slurm-log-queueing-clean", synthetic=False,
                             inference_label=doc["inputs"]["inference"], request_model=object())
    key = power.sweep_key_inputs(con, fitted)
    shas = [str(store.dataset(con, n)["sha256"]) for n in power.request_traces(con)]
    con.close()
    assert key["inference_model"] == "groups:" + ",".join(shas) == key["inference"]


# --- issue 18 item 15: a trace too sparse to represent serving load -------------------

SPARSE_STORE = ("mit_supercloud/slurm-log-queueing-clean.csv",
                "alibaba_gpu_traces/v2026_genai/lora_request_trace.csv",
                "azure_llm/AzureLLMInferenceTrace_code.csv")


@pytest.fixture(scope="module")
def sparse_db(tmp_path_factory):
    """MIT SuperCloud jobs, the Alibaba LoRA trace (longest span, 70 % empty minutes) and the
    Azure code trace (58 minutes, 22 % empty)."""
    db = tmp_path_factory.mktemp("sparse") / "s.duckdb"
    seed(db, *SPARSE_STORE)
    return db


def test_sparse_lora_trace_is_never_the_default(sparse_db):
    """The staged figures behind the rule: LoRA's share of empty minutes is 0.704 (9,805 of
    33,157 minutes hold a request), Azure code's 0.241 on its whole span; only LoRA is at or
    above :data:`analytics.power.SPARSE_EMPTY_SHARE`, so the dense Azure trace is the default
    although LoRA spans 23 days and Azure under an hour."""
    from analytics import power as powersim
    from analytics.services import power

    con = store.connect(sparse_db, read_only=True)
    minutes = store.demand_minutes(con).set_index("name")
    _, demand = power.candidates(con)
    con.close()
    assert minutes.loc["lora_request_trace"].tolist() == [9805, 33157]
    assert minutes.loc["AzureLLMInferenceTrace_code"].tolist() == [44, 58]
    assert demand == ["AzureLLMInferenceTrace_code", "lora_request_trace"]
    assert powersim.too_sparse(1 - 9805 / 33157) and not powersim.too_sparse(1 - 44 / 58)


def test_candidates_put_sparse_traces_after_dense_ones_whatever_their_kind():
    """Dense before sparse comes first, then token traces before GPU-seconds ones, then span."""
    from analytics import power as powersim

    day = pd.Timestamp("2023-01-02")
    ledger = pd.DataFrame({
        "dataset_id": [1, 2, 3, 4], "kind": ["requests", "requests", "demand_series", "jobs"],
        "name": ["sparse_tokens_long", "dense_gpu_s", "dense_tokens_short", "jobs"],
        "rows": [10, 10, 10, 10], "resolution_s": [None, None, 60, None],
        "ts_min": [day] * 4,
        "ts_max": [day + pd.Timedelta(days=30), day + pd.Timedelta(days=2),
                   day + pd.Timedelta(hours=1), day]})
    _, demand = powersim.candidate_datasets(ledger, frozenset({"dense_gpu_s"}),
                                            frozenset({"sparse_tokens_long"}))
    assert demand == ["dense_tokens_short", "dense_gpu_s", "sparse_tokens_long"]
    density = powersim.demand_density(np.array([0.0, 0.0, 3.0, 0.0]), "t")
    assert density["empty_minute_share"] == 0.75 and density["median_per_min"] == 0.0
    assert density["too_sparse"] and "t is too sparse" in density["warning"]
    assert powersim.demand_density(np.array([0.0, 2.0, 3.0, 1.0]), "t")["warning"] is None


def test_cli_powersim_json_warns_when_the_trace_is_too_sparse(sparse_db, capsys):
    rc, doc = _cli(capsys, "--db", str(sparse_db), "powersim", "--inference",
                   "lora_request_trace", "--days", "1", "--warmup-days", "1", "--gpus", "32")
    assert rc == 0
    density = doc["inputs"]["demand_density"]
    # the simulated shape is the trace's 22 whole days from its first midnight
    assert density["minutes"] == 31_680 and density["too_sparse"] is True
    assert 0.69 < density["empty_minute_share"] < 0.71 and density["median_per_min"] == 0.0
    assert doc["warnings"] == [density["warning"]]
    assert doc["warnings"][0].startswith("lora_request_trace is too sparse to represent "
                                         "serving load: 70% of its 31,680 minutes")
