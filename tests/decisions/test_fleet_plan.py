"""Replicas over time under a stated risk, and the files that launch them (issue 30 items 2, 4,
5): one plan derived by hand on a small grid with two arms, the realised shortfall of plans on
the real BurstGPT week and Azure conversation traces (capacity from the real ML.ENERGY v3
Qwen3-14B sweeps) at two risk levels, and every export parsed back against its plan."""

from __future__ import annotations

import shlex
import subprocess

import numpy as np
import pandas as pd
import pytest
import yaml
from harness import seed, strict_loads

from analytics import store
from analytics.cli import main
from analytics.decisions import capacity, fleet_export, fleet_plan
from analytics.decisions.capacity import Overbooking
from analytics.decisions.fleet import Slo
from analytics.services import demand
from analytics.services import fleet as service

MODEL, TASK = "Qwen/Qwen3-14B", "lm-arena-chat"
WEEK, CONV, ROWS = "burstgpt1_week1_per_minute_tps", "AzureLLMInferenceTrace_conv", \
    "BurstGPT_1_head400"
SLO = Slo(itl_p99_ms=80.0)


def _by_hand_overbooking() -> Overbooking:
    ts = pd.date_range("2024-01-01", periods=6, freq="h")  # a Monday, hourly bins
    frame = pd.DataFrame({"ts": ts, "part": ["calibration"] * 2 + ["test"] * 4,
                          "y": [30e3, 50e3, 20e3, 80e3, 100e3, 40e3],
                          "capacity": [36e3, 60e3, 30e3, 72e3, 108e3, 50e3]})
    return Overbooking(1.0, pd.DataFrame(), frame, {"violation_rate": 0.25}, {}, 0.05, 0.1)


def test_a_plan_derived_by_hand_on_a_small_grid_with_two_arms():
    ob = _by_hand_overbooking()
    a = fleet_plan.ReplicaCapacity(tok_s=10.0, gpus=1, energy_per_token_j=0.5,
                                   price_usd_per_gpu_h=2.0, idle_w_per_gpu=1.0)
    b = fleet_plan.ReplicaCapacity(tok_s=25.0, gpus=2, alpha=0.1)
    pa = fleet_plan.plan(ob, 100e3, a, 3600, gco2_per_kwh=400.0)
    pb = fleet_plan.plan(ob, 100e3, b, 3600)
    # one replica of A serves 10 x 3600 = 36,000 tokens a bin: ceil(c / 36,000)
    assert pa.frame["replicas"].tolist() == [1, 2, 1, 2, 3, 2]
    # B: 90,000 a bin
    assert pb.frame["replicas"].tolist() == [1, 1, 1, 1, 2, 1]
    # test bin 80,000 > 2 x 36,000: one short bin of four for A, none for B
    assert pa.backtest["shortfall_bins"] == 1 and pa.backtest["shortfall_rate"] == 0.25
    assert pb.backtest["shortfall_bins"] == 0
    assert pa.backtest["shortfall_fraction"] == pytest.approx(8e3 / 240e3)
    # the stated risk: the demand certificate's target + the capacity risk (union bound)
    assert pa.risk["total"] == 0.05 and pb.risk["total"] == pytest.approx(0.15)
    assert pa.backtest["within_risk"] is False  # 0.25 > 0.05: the backtest says so
    e = pa.economics
    assert e["planned_gpu_h"] == 8.0 and e["peak_gpu_h"] == 12.0  # peak 100k: 3 x 4 h
    assert e["saved_fraction"] == pytest.approx(1 / 3)
    assert pb.economics["planned_gpu_h"] == 10.0 and pb.economics["peak_gpu_h"] == 16.0
    served = 20e3 + 72e3 + 100e3 + 40e3
    assert e["served_tokens"] == served
    assert e["usd"] == 16.0 and e["usd_per_1m_tokens"] == pytest.approx(16.0 / served * 1e6)
    assert e["usd_per_day"] == pytest.approx(16.0 / (4 / 24))
    # linear power model: 1 W idle x 8 replica-hours + (0.5 J x 10 tok/s - 1 W) x busy seconds
    joules = 8 * 3600 * 1.0 + served / 10.0 * (0.5 * 10.0 - 1.0)
    assert e["energy_kwh"] == pytest.approx(joules / 3.6e6)
    assert e["j_per_token"] == pytest.approx(joules / served)
    assert e["gco2_per_1m_tokens"] == pytest.approx(joules / 3.6e6 * 400.0 / served * 1e6)
    assert pb.economics["usd"] is None and pb.economics["energy_kwh"] is None  # not stated
    # hours without a planned bin take the plan's highest hour
    assert fleet_plan.hourly_minimum(pa) == [1, 2, 1, 2, 3, 2] + [3] * 18
    # a share of output tokens scales demand and capacity alike
    half = fleet_plan.plan(ob, 100e3, a, 3600, output_share=0.5)
    assert half.frame["demand"].tolist() == (ob.frame["y"] * 0.5).tolist()


def test_a_plan_without_a_certified_factor_is_refused():
    ob = _by_hand_overbooking()
    ob.factor = None
    with pytest.raises(ValueError, match="no overbooking factor certifies"):
        fleet_plan.plan(ob, 1.0, fleet_plan.ReplicaCapacity(tok_s=1.0), 3600)
    with pytest.raises(ValueError, match="positive number of tokens/s"):
        fleet_plan.ReplicaCapacity(tok_s=float("nan"))


@pytest.fixture(scope="module")
def db(tmp_path_factory, model_cache):
    from conftest import share_cache

    path = tmp_path_factory.mktemp("fleet_plan") / "plan.duckdb"
    share_cache(path, model_cache)
    seed(path, "ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
         "azure_llm/AzureLLMInferenceTrace_conv.csv",
         "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv", "burstgpt/BurstGPT_1_head400.csv")
    return path


#: (dataset, bin, request options): the week is total tokens per minute, so its output share
#: is the completion share of the first 400 rows of the same BurstGPT_1 log; both traces are
#: one tenant's sample, scaled to need several replicas
TRACES = {WEEK: ("5min", {"output_share_from": ROWS, "scale": 300.0}),
          CONV: ("10s", {"scale": 200.0})}


@pytest.mark.parametrize("dataset", list(TRACES))
def test_the_realised_shortfall_is_within_the_stated_risk_at_two_levels(db, dataset):
    bin_, opts = TRACES[dataset]
    con = store.connect(db, read_only=True)
    docs = {}
    for risk in (0.05, 0.10):
        req = service.PlanRequest(MODEL, SLO, risk=risk, task=TASK, **opts)
        out = service.plan(con, dataset, req, bin_)
        p = out["plan"]
        assert p.risk["total"] == risk and p.risk["capacity"] == 0.0
        assert p.backtest["bins"] > 50
        assert p.backtest["shortfall_rate"] <= risk, p.backtest
        assert p.backtest["within_risk"] is True
        test = p.frame[p.frame["part"] == "test"]
        assert test["replicas"].max() > test["replicas"].min() >= 1  # it follows the demand
        # the replicas are the provisioned demand over one replica's tokens a bin, by hand
        env = demand.envelope(con, demand.GridRequest.of(dataset, bin_, w_prompt=0.0,
                                                          w_completion=1.0), req.envelope)
        ob, _ = capacity.overbooking_of(env, risk, req.delta)
        knee = out["arm"]["throughput_tok_s"] * p.bin_s
        by_hand = np.maximum(np.ceil(ob.frame["capacity"] * opts["scale"] * out["share"]
                                     / knee - 1e-9), 1)
        assert p.frame["replicas"].tolist() == by_hand.astype(int).tolist()
        assert p.economics["planned_gpu_h"] < p.economics["peak_gpu_h"]
        docs[risk] = service.plan_document(con, dataset, req, bin_)
    con.close()
    # a higher stated risk never plans more GPU-hours
    assert (docs[0.10]["economics"]["planned_gpu_h"]
            <= docs[0.05]["economics"]["planned_gpu_h"])
    doc = docs[0.05]
    strict_loads(__import__("json").dumps(doc, allow_nan=False))
    # the H100 knee is priced by the catalog, the B200 is not: the H100 arm is chosen
    assert doc["arm"]["label"] == "H100-80GB x1 TP1 bf16" and doc["arm"]["concurrency"] == 128
    assert [a["label"] for a in doc["arms"]][0] == doc["arm"]["label"]
    assert doc["usd_per_1m_tokens"] > 0 and doc["economics"]["j_per_token"] > 0
    # the weekday x hour profile: the planned days' hours, null where no bin was planned
    week = doc["by_weekday_hour_utc"]
    assert set(week) == {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
    assert max(v for day in week.values() for v in day if v is not None) == max(
        doc["replicas"]["by_hour_utc"])


def test_the_output_share_of_a_series_comes_from_the_same_log(db):
    con = store.connect(db, read_only=True)
    share, basis = service._output_share(con, store.dataset(con, WEEK),
                                         service.PlanRequest(MODEL, SLO, output_share_from=ROWS))
    rows = pd.read_csv(__import__("conftest").shared("burstgpt/BurstGPT_1_head400.csv"))
    by_hand = rows["Response tokens"].sum() / (rows["Request tokens"].sum()
                                               + rows["Response tokens"].sum())
    assert share == pytest.approx(by_hand) and ROWS in basis
    with pytest.raises(ValueError, match="pre-binned series"):
        service.plan(con, WEEK, service.PlanRequest(MODEL, SLO, task=TASK))
    with pytest.raises(ValueError, match="request trace"):
        service.plan(con, CONV, service.PlanRequest(MODEL, SLO, task=TASK, output_share=0.5),
                     "10s")
    with pytest.raises(ValueError, match="no measured arm"):
        service.plan(con, CONV, service.PlanRequest(MODEL, Slo(itl_p99_ms=1.0), task=TASK),
                     "10s")
    con.close()


def _plan(db, *extra) -> list[str]:
    return ["--db", str(db), "plan", WEEK, "--model", MODEL, "--task", TASK, "--itl-p99-ms",
            "80", "--scale", "300", "--output-share-from", ROWS, *extra]


def test_every_export_parses_and_carries_the_plan(db, capsys):
    assert main(_plan(db)) == 0
    doc = strict_loads(capsys.readouterr().out)
    hourly, arm = doc["replicas"]["by_hour_utc"], doc["arm"]
    # the hourly profile covers calibration and test bins: at least the test window's busiest
    assert len(hourly) == 24 and max(hourly) >= doc["replicas"]["max"]

    def emitted(target, *more):
        assert main(_plan(db, "--emit", target, "--max-model-len", "8192", *more)) == 0
        return capsys.readouterr().out

    argv = shlex.split(emitted("vllm"))
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert argv[:3] == ["vllm", "serve", MODEL]
    assert flags["--tensor-parallel-size"] == str(arm["tp"])
    assert flags["--max-num-seqs"] == str(int(arm["concurrency"]))
    assert flags["--dtype"] == "bfloat16" and flags["--max-model-len"] == "8192"

    deployment, scaled = yaml.safe_load_all(emitted("k8s", "--prometheus-url",
                                                    "http://prometheus:9090"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert shlex.split(container["args"][0]) == argv
    assert container["resources"]["limits"]["nvidia.com/gpu"] == str(arm["n_gpus"])
    spec = scaled["spec"]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1" and spec["scaleTargetRef"]["name"] == \
        deployment["metadata"]["name"]
    assert spec["minReplicaCount"] == min(hourly)
    # the most: the flat peak, the busiest planned hour, or what a bin's realised demand needed
    # (8 at 300x: the burst the Prometheus trigger exists to absorb)
    r = doc["replicas"]
    assert spec["maxReplicaCount"] == max(r["peak"], max(hourly), r["needed_max"]) == 8
    # the cron windows give back the planned replicas of every UTC hour
    per_hour = [spec["minReplicaCount"]] * 24
    for t in spec["triggers"]:
        if t["type"] == "cron":
            a, b = int(t["metadata"]["start"].split()[1]), int(t["metadata"]["end"].split()[1])
            for h in range(a, b or 24):
                per_hour[h] = int(t["metadata"]["desiredReplicas"])
    assert per_hour == hourly
    prom = [t for t in spec["triggers"] if t["type"] == "prometheus"][0]["metadata"]
    assert prom["query"] == f'sum(vllm:num_requests_waiting{{model_name="{MODEL}"}})'
    # one replica per knee's worth of waiting requests (its --max-num-seqs batch)
    assert prom["serverAddress"] == "http://prometheus:9090"
    assert float(prom["threshold"]) == arm["concurrency"] == 128

    sky = yaml.safe_load(emitted("skyserve"))
    policy = sky["service"]["replica_policy"]
    assert (policy["min_replicas"], policy["max_replicas"]) == (
        spec["minReplicaCount"], spec["maxReplicaCount"])
    assert policy["target_qps_per_replica"] == pytest.approx(
        arm["throughput_tok_s"] / arm["out_len"], rel=1e-4)
    assert sky["resources"]["accelerators"] == f"H100:{arm['n_gpus']}"
    assert shlex.split(sky["run"]) == argv

    script = emitted("slurm")
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)  # it parses
    directives = dict(line[len("#SBATCH "):].split("=", 1) for line in script.splitlines()
                      if line.startswith("#SBATCH "))
    assert directives["--array"] == f"0-{max(hourly) - 1}"
    assert directives["--gpus-per-node"] == str(arm["n_gpus"])
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    assert shlex.split(srun)[1:len(argv) - 3] == argv[:-4]  # the same engine flags


def test_the_plan_command_refuses_clearly(db, capsys):
    """Refusals, several from a break-it review: a model benchmarked on several tasks needs
    --task (the knee across workloads was the fastest's); a scale whose replicas overflow; a
    Slurm time that is not one (a newline put a shell line into the script); a context length
    or a Prometheus address that is none."""
    task = ["--task", TASK]
    for args, says in (([*task], "pre-binned series"),
                       (["--output-share", "0.3"], "state which workload the trace is"),
                       ([*task, "--output-share", "0.3", "--arm", "TPU x1 TP1 bf16"],
                        "does not meet"),
                       ([*task, "--output-share", "0.3", "--emit", "nope"], "invalid choice"),
                       ([*task, "--output-share", "0.3", "--scale", "1e308"],
                        "replicas in a bin"),
                       ([*task, "--output-share", "0.3", "--min-replicas", "10000000"],
                        "replicas in a bin"),
                       ([*task, "--output-share", "0.3", "--emit", "slurm", "--time-limit",
                         "1:00:00\ntouch /tmp/x"], "is not a Slurm time"),
                       ([*task, "--output-share", "0.3", "--emit", "vllm", "--max-model-len",
                         "0"], "positive number of tokens"),
                       ([*task, "--output-share", "0.3", "--emit", "k8s", "--prometheus-url",
                         "not a url; $(id)"], "is not an http(s) URL"),
                       ([*task, "--output-share", "0.3", "--capacity-risk", "0.05"],
                        "below the stated risk")):
        argv = ["--db", str(db), "plan", WEEK, "--model", MODEL, "--itl-p99-ms", "80", *args]
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr()
        assert code == 2, (args, out)
        assert says in (out.out + out.err), (args, out)
        if out.out:
            assert strict_loads(out.out)["error"]


def test_cron_windows_wrap_midnight_and_skip_a_flat_day():
    assert fleet_export.cron_windows([3] * 24) == []
    assert fleet_export.cron_windows([0] * 6 + [2] * 18) == [(6, 24, 2)]
    assert fleet_export.name_of("Qwen/Qwen3-14B") == "qwen3-14b"
    assert fleet_export.name_of("!!!") == "llm"


def test_a_capacity_risk_plans_the_held_out_lower_bound_of_the_knee(db):
    bin_, opts = TRACES[WEEK]
    con = store.connect(db, read_only=True)
    exact = service.plan(con, WEEK, service.PlanRequest(MODEL, SLO, risk=0.10, task=TASK,
                                                          **opts))
    bounded = service.plan(con, WEEK, service.PlanRequest(
        MODEL, SLO, risk=0.10, capacity_risk=0.05, task=TASK, arm=exact["label"], **opts))
    with pytest.raises(ValueError, match="below the stated risk"):
        service.plan(con, WEEK, service.PlanRequest(MODEL, SLO, risk=0.05, capacity_risk=0.05,
                                                    task=TASK, **opts))
    con.close()
    p, q = exact["plan"], bounded["plan"]
    # the stated risk is the same; half of it is now spent on capacity
    assert q.risk["total"] == pytest.approx(0.10) and q.risk["capacity"] == 0.05
    assert q.risk["demand"] == pytest.approx(0.05)
    assert q.replica.tok_s < q.replica.measured_tok_s == p.replica.tok_s
    assert "held-out-cell lower bound" in q.replica.basis
    # a lower capacity and a smaller demand risk: never fewer replicas in any bin
    assert (q.frame["replicas"].to_numpy() >= p.frame["replicas"].to_numpy()).all()
    assert q.backtest["shortfall_rate"] <= p.backtest["shortfall_rate"] <= 0.10


def test_arms_never_benchmarked_are_judged_on_the_calibrated_percentile_or_abstain(db):
    """Issue 30 item 1: where an arm is not measured, the cost model's calibrated q90 of the
    SLO's percentile judges it at each concurrency, and its throughput's one-sided lower bound
    is its capacity; outside measured support it abstains."""
    import math

    from analytics.advisor import decide, lower, slo_arms
    from analytics.services import advisor as advisor_service

    bin_, opts = TRACES[WEEK]
    con = store.connect(db, read_only=True)
    req = service.PlanRequest(MODEL, SLO, risk=0.10, capacity_risk=0.05, task=TASK, **opts)
    out = service.plan(con, WEEK, req, bin_)
    adv = service._advisor_for(con, SLO.limits())
    doc = service.document(out, WEEK, req)
    con.close()
    pred = out["predicted"].set_index(["hardware", "tp", "precision"])
    # every measured arm is left to its sweep; the others are predicted or abstain
    assert ("H100-80GB", 1, "bf16") not in pred.index
    assert pred.loc[("A100-40GB", 1, "bf16"), "status"] == "abstains"
    assert "never measured" in pred.loc[("A100-40GB", 1, "bf16"), "why"]  # no v3 run on A100
    meets = out["predicted"][out["predicted"]["status"] == "meets"]
    assert len(meets) and set(doc["predicted"]["meets"]) == {
        service.arm_label(r) for r in meets.to_dict("records")}
    # one predicted arm by hand: walk the concurrencies with the advisor's own scores
    arm = meets.iloc[0]
    last_ok = None
    for c in slo_arms.CONCURRENCIES:
        row = advisor_service.advise(adv, decide.Request(
            MODEL, 14.0, float(c), float("nan"), float(arm["out_len"]), task=TASK),
            advisor_service.utility())
        row = row[(row["hardware"] == arm["hardware"]) & (row["tp"] == arm["tp"])
                  & (row["precision"] == arm["precision"])].iloc[0]
        inside = not row["abstain"] and row["feasible"]
        if inside and row["itl_p99_ms_q90"] <= 80.0:
            last_ok = (c, row)
        elif last_ok is not None:
            break
    assert last_ok is not None and arm["concurrency"] == last_ok[0]
    bound = last_ok[1]["throughput_tok_s_q10"] * math.exp(-lower.offset(adv.cost.oof, 0.05))
    assert arm["lower_tok_s"] == pytest.approx(bound)
    planned = dict(out["ranked"])[service.arm_label(arm)][1]
    assert planned.replica.tok_s == pytest.approx(bound) and planned.replica.measured_tok_s is None
    assert planned.replica.basis.startswith("predicted")
    assert planned.backtest["shortfall_rate"] <= 0.10


def test_a_vllm_bench_result_is_capacity_too_and_argonne_medians_cannot_judge_a_p99(
        tmp_path, model_cache):
    """The capacity side from the other staged benchmark files: a real ``vllm bench serve``
    result (case 19: p99 ITL 102.5 ms at 503.9 output tok/s) plans the Azure conversation
    trace; the Argonne tables carry medians only, so their arms are unmeasured for a p99."""
    from conftest import share_cache
    from harness import case_file

    from analytics.ingest import files as ingest

    path = tmp_path / "bench.duckdb"
    share_cache(path, model_cache)
    seed(path, "azure_llm/AzureLLMInferenceTrace_conv.csv",
         "llm_inference_bench_argonne/Fig_22__all_results_TTFT_ITL.csv")
    con = store.connect(path)
    ingest.ingest_files(con, [ingest.FileIn(case_file(
        "19-vllm-bench-request-rate-no-concurrency.json"), "case19.json")])
    model = "example-org/example-8b-instruct"
    for risk in (0.05, 0.10):
        out = service.plan(con, CONV, service.PlanRequest(model, Slo(itl_p99_ms=110.0),
                                                          risk=risk, scale=20.0), "10s")
        p = out["plan"]
        assert out["label"] == "H100-80GB x1 TP1 bf16" and p.replica.tok_s == pytest.approx(503.9)
        assert p.backtest["shortfall_rate"] <= risk
        assert p.frame["replicas"].max() > 1
    argonne = store.bench_runs(con)
    argonne = argonne[argonne["source"].str.startswith("Argonne")]["model"].iloc[0]
    doc = service.slo_capacity_document(con, argonne, Slo(itl_p99_ms=110.0))
    con.close()
    assert {a["status"] for a in doc["arms"]} == {"unmeasured"} and doc["meets"] == 0


def test_launch_files_are_refused_for_what_they_cannot_carry_faithfully():
    """Break-it review: a model id that reads as a flag, or holds a character YAML ends a line
    at (U+2028 put a Secret into the k8s file), gets no launch file; a benchmark that ran
    8 GPUs at TP1 (expert parallel, unrecorded) is not launched on one."""
    ob = _by_hand_overbooking()
    p = fleet_plan.plan(ob, 100e3, fleet_plan.ReplicaCapacity(tok_s=10.0), 3600)
    knee = {"hardware": "H100-80GB", "n_gpus": 1, "tp": 1, "precision": "bf16",
            "concurrency": 64.0, "out_len": 500.0}
    for model in ("--trust-remote-code", "org/x\u2028kind: Secret", "a\x85b", ""):
        for target in fleet_export.TARGETS:
            with pytest.raises(ValueError, match="no launch file"):
                fleet_export.render(target, model, knee, p)
    moe = {**knee, "n_gpus": 8}
    with pytest.raises(ValueError, match="expert or data parallel"):
        fleet_export.render("k8s", "org/moe", moe, p)
    # the header of an odd but legal id keeps every document a document
    text = fleet_export.render("k8s", 'org/q"uote #x: y', {**knee, "hardware": "H100\u2029: z"},
                               p, prometheus_url="http://p:9090")
    assert [d["kind"] for d in yaml.safe_load_all(text)] == ["Deployment", "ScaledObject"]
    query = [t for t in list(yaml.safe_load_all(text))[1]["spec"]["triggers"]
             if t["type"] == "prometheus"][0]["metadata"]["query"]
    assert query == 'sum(vllm:num_requests_waiting{model_name="org/q\\"uote #x: y"})'
    # a knee of unmeasured concurrency: the files say so and write no --max-num-seqs
    loose = fleet_export.render("slurm", "org/m", {**knee, "concurrency": float("nan")}, p)
    assert "an unmeasured concurrency" in loose and "--max-num-seqs" not in loose
