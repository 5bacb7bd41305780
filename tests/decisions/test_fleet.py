"""Capacity at an SLO per measured arm (issue 30 item 1): the knee of each arm's measured
concurrency sweep, on the real ML.ENERGY v3 leaderboard and a real vllm bench result (case 19).
"""

from __future__ import annotations

import shlex

import polars as pl
import pytest
from conftest import shared
from harness import case_file, strict_loads

from analytics import cli, store
from analytics.decisions.fleet import Slo, arm_capacity
from analytics.ingest import files as ingest
from analytics.ingest.formats import parse_file

FLAT = "ml_energy/leaderboard_v3/all_task_configurations_flat.csv"
MODEL, TASK = "Qwen/Qwen3-14B", "lm-arena-chat"


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    db = tmp_path_factory.mktemp("fleet") / "s.duckdb"
    con = store.connect(db)
    ingest.ingest_files(con, [ingest.FileIn(shared(FLAT), "flat.csv"),
                              ingest.FileIn(case_file("19-vllm-bench-request-rate-no-"
                                                      "concurrency.json"), "case19.json")])
    runs = store.bench_runs(con)
    con.close()
    return db, runs


def _sweep(hardware: str) -> pl.DataFrame:
    """The arm's measured runs, read from the file without headroom's store."""
    return parse_file(shared(FLAT)).frame.filter(
        (pl.col("model") == MODEL) & (pl.col("task") == TASK) & (pl.col("hardware") == hardware)
    ).sort("concurrency")


def test_the_knee_is_the_fastest_run_within_the_itl_limit(bench):
    _, runs = bench
    arms = arm_capacity(runs, MODEL, Slo(itl_p99_ms=80.0), TASK).set_index("hardware")
    for hw in ("H100-80GB", "B200"):
        sweep = _sweep(hw)
        within = sweep.filter(pl.col("itl_p99_ms") <= 80.0)
        knee = within.sort("throughput_tok_s").row(-1, named=True)  # by hand: fastest within
        arm = arms.loc[hw]
        assert arm["status"] == "meets" and arm["judged_on"] == "itl_p99_ms"
        assert arm["concurrency"] == knee["concurrency"]
        assert arm["throughput_tok_s"] == pytest.approx(knee["throughput_tok_s"])
        assert arm["energy_per_token_j"] == pytest.approx(knee["energy_per_token_j"])
        # the sweep goes past the knee: the SLO breaks at its highest concurrency
        assert sweep["itl_p99_ms"][-1] > 80.0 and not arm["held_to_max"]
        assert arm["runs"] == sweep.height
    # the H100 knee, read off the file: 128 concurrent at 72.4 ms p99 ITL (256 is 90.9 ms)
    assert arms.loc["H100-80GB", "concurrency"] == 128.0
    # the command that launches one replica at that knee (vLLM's engine arguments)
    argv = shlex.split(arms.loc["H100-80GB", "vllm_serve"])
    assert argv == ["vllm", "serve", MODEL, "--tensor-parallel-size", "1", "--dtype",
                    "bfloat16", "--max-num-seqs", "128"]
    # the better arm first (per-GPU throughput)
    assert list(arms.index)[0] == "B200"


def test_a_tight_limit_breaks_every_run_and_an_unmeasured_latency_abstains(bench):
    _, runs = bench
    tight = arm_capacity(runs, MODEL, Slo(itl_p99_ms=10.0), TASK)
    assert set(tight["status"]) == {"breaks"} and tight["throughput_tok_s"].isna().all()
    none = arm_capacity(runs, MODEL, Slo(ttft_p90_ms=500.0), TASK)  # ML.ENERGY has no TTFT
    assert set(none["status"]) == {"unmeasured"} and none["judged"].eq(0).all()


def test_a_p99_stands_for_a_missing_p90_only_within_the_limit(bench):
    _, runs = bench  # case 19 carries p99 TTFT 171.3 ms and no p90
    model = "example-org/example-8b-instruct"
    [ok] = arm_capacity(runs, model, Slo(ttft_p90_ms=200.0)).to_dict("records")
    assert ok["status"] == "meets" and ok["judged_on"] == "ttft_p99_ms"
    assert ok["throughput_tok_s"] == 503.9 and ok["held_to_max"]  # its one run meets
    [unknown] = arm_capacity(runs, model, Slo(ttft_p90_ms=150.0)).to_dict("records")
    assert unknown["status"] == "unmeasured"  # p99 171.3 > 150 says nothing of the p90
    [breaks] = arm_capacity(runs, model, Slo(ttft_p99_ms=150.0)).to_dict("records")
    assert breaks["status"] == "breaks"


def test_cli_document_is_strict_and_refusals_are_clear(bench, capsys):
    db, _ = bench
    rc = cli.main(["--db", str(db), "slo-capacity", "--model", MODEL, "--task", TASK,
                   "--itl-p99-ms", "80"])
    doc = strict_loads(capsys.readouterr().out)
    assert rc == 0 and doc["meets"] == 2 and doc["slo"] == {"itl_p99_ms": 80.0}
    assert {a["hardware"] for a in doc["arms"]} == {"B200", "H100-80GB"}
    assert doc["arms"][0]["in_len"] is None  # ML.ENERGY v3 reports no input length: null
    rc = cli.main(["--db", str(db), "slo-capacity", "--model", MODEL])
    err = strict_loads(capsys.readouterr().out)
    assert rc == 2 and "at least one SLO limit" in err["error"]
    rc = cli.main(["--db", str(db), "slo-capacity", "--model", "nope", "--itl-p99-ms", "80"])
    err = strict_loads(capsys.readouterr().out)
    assert rc == 2 and "no benchmark run of model 'nope'" in err["error"]


def test_a_document_from_the_synthetic_demo_says_so(tmp_path, capsys):
    """Every benchmark row is read, so the demo's synthetic grid labels the document; its runs
    carry medians only, so a p99 ITL limit leaves every arm unmeasured (never a made-up tail)."""
    db = tmp_path / "demo.duckdb"
    assert cli.main(["--db", str(db), "demo"]) == 0
    capsys.readouterr()
    rc = cli.main(["--db", str(db), "slo-capacity", "--model", "synthetic/dense-8b",
                   "--itl-p99-ms", "100"])
    doc = strict_loads(capsys.readouterr().out)
    assert rc == 0 and doc["synthetic_datasets"] and doc["meets"] == 0
    assert {a["status"] for a in doc["arms"]} == {"unmeasured"}


@pytest.mark.parametrize(("run", "flags"), [
    ({"tp": 4, "pp": 2, "precision": "fp8", "concurrency": 64.0},
     ["--tensor-parallel-size", "4", "--pipeline-parallel-size", "2", "--quantization", "fp8",
      "--max-num-seqs", "64"]),
    ({"tp": 2, "pp": 1, "precision": "int4", "concurrency": 16.0},  # AWQ or GPTQ: unsaid
     ["--tensor-parallel-size", "2", "--max-num-seqs", "16"]),
    ({"tp": 1, "precision": "fp16", "concurrency": float("nan")},
     ["--tensor-parallel-size", "1", "--dtype", "float16"]),
])
def test_vllm_serve_flags_follow_the_arm(run, flags):
    from analytics.decisions.fleet import vllm_serve_args

    assert vllm_serve_args("m", run) == ["vllm", "serve", "m", *flags]
