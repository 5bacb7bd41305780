"""Launch advisor (OmniPilot): priors, cost model, calibration, feasibility, abstention,
ranking, backtest and promotion gate - on the real staged benchmarks and job history."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import shared
from harness import strict_loads
from scipy import stats

from analytics import cli, store
from analytics.advisor import backtest as advisor_backtest
from analytics.advisor import decide, gate, model, persist, priors, value
from analytics.ingest import files as ingest
from analytics.services import advisor as advisor_service

# the staged benchmark store and its fitted advisor are the session fixtures ``bench_db`` and
# ``adv`` of conftest.py (shared with test_advisor_voi.py)


# ------------------------------------------------------------------ launch-success priors
def test_beta_binomial_shrinkage_matches_hand_computation():
    jobs = pd.DataFrame({
        "n_gpus": [1] * 10 + [4] * 4 + [8] * 2,
        "gpu_kind": ["volta"] * 16,
        "state": ["COMPLETED"] * 9 + ["FAILED"] + ["COMPLETED"] * 1 + ["NODE_FAIL"] * 3
        + ["COMPLETED", "CANCELLED"],  # CANCELLED is no launch outcome
    })
    out = priors.launch_priors(jobs)
    assert out["trials"].tolist() == [10, 4, 1]
    assert out["successes"].tolist() == [9, 1, 1]
    a, b = out["prior_a"].iloc[0], out["prior_b"].iloc[0]
    for _, r in out.iterrows():  # posterior mean = (s + a) / (n + a + b)
        assert r["posterior_mean"] == pytest.approx((r["successes"] + a) / (r["trials"] + a + b))
        assert r["lo"] <= r["posterior_mean"] <= r["hi"]
    # shrinkage: the sparse 1/1 configuration moves toward the pool, below its raw rate 1.0
    assert out.loc[out["n_gpus"] == 8, "posterior_mean"].iloc[0] < 1.0
    m, lo, hi = priors.shrink(3, 4, priors.BetaPrior(6.0, 4.0))
    assert m == pytest.approx(9 / 14)


def test_priors_per_gpu_count_on_mit_supercloud(bench_db):
    con = store.connect(bench_db)
    pri = priors.launch_priors(store.jobs(con))
    waits = priors.queue_wait_h(store.jobs(con))
    con.close()
    assert pri["n_gpus"].tolist() == [1, 2, 4, 6, 8, 16]
    assert pri["trials"].tolist() == [1537, 163, 26, 3, 14, 5]
    pooled = pri["successes"].sum() / pri["trials"].sum()
    # every shrunk rate lies between its raw rate and the prior mean
    for _, r in pri.iterrows():
        lo, hi = sorted([r["raw_rate"], r["prior_mean"]])
        assert lo - 1e-9 <= r["posterior_mean"] <= hi + 1e-9
    assert abs(pri["prior_mean"].iloc[0] - pooled) < 0.1
    assert set(waits["n_gpus"]) >= {1, 2, 4, 8}


def test_openb_pod_phases_count_as_launch_outcomes(con):
    """Regression: Kubernetes ``SUCCEEDED`` pods were not counted as successes, so an openb
    history gave only failures."""
    path = shared("alibaba_gpu_traces/v2023_openb/openb_pod_list_default.csv")
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    jobs = store.jobs(con)
    gpu = jobs[jobs["n_gpus"] > 0]
    pri = priors.launch_priors(jobs)
    assert pri["successes"].sum() == (gpu["state"] == "SUCCEEDED").sum() > 0
    assert pri["trials"].sum() == gpu["state"].isin(["SUCCEEDED", "FAILED"]).sum()
    # no spread between GPU counts on this trace: the prior's strength is capped, its mean must
    # stay at the pooled rate (it drifted to 0.5 when a and b were capped separately)
    pooled = pri["successes"].sum() / pri["trials"].sum()
    assert pri["prior_mean"].iloc[0] == pytest.approx(pooled, abs=0.01)


def test_no_job_history_falls_back_to_the_flat_default(con):
    ctx = decide.Context(priors.launch_priors(store.jobs(con)),
                         priors.queue_wait_h(store.jobs(con)))
    u = decide.UtilityParams()
    assert ctx.p_launch(4, "H100-80GB", u) == u.default_launch_success == 0.95
    assert ctx.wait_h(4) == 0.0


# ------------------------------------------------------------------ cost model
def test_folds_never_share_a_workload_cell(adv):
    oof = adv.cost.oof
    thr = oof[oof["throughput_tok_s"].notna()]
    assert (thr["fold"] >= 0).all()
    per_cell = thr.groupby("cell")["fold"].nunique()
    assert (per_cell == 1).all()  # a cell's rows are all predicted by the same held-out fold
    folds = model.cell_folds(thr["cell"].to_numpy(), 5)
    cells = thr["cell"].to_numpy()
    for train, test in folds:
        assert not set(cells[train]) & set(cells[test])


def test_calibrated_intervals_and_quantile_order(adv):
    m = adv.cost.metrics["throughput_tok_s"]
    assert m["fitted"] and m["rows"] > 5000 and m["cells"] > 500
    assert 0.7 <= m["coverage"]["held_out_cell"] <= 0.9  # nominal 0.8 on unseen cells
    assert 0 <= m["crossing_rate"] < 0.5
    oof = adv.cost.oof.dropna(subset=["throughput_tok_s_q10"])
    assert (oof["throughput_tok_s_q10"] <= oof["throughput_tok_s_q50"]).all()
    assert (oof["throughput_tok_s_q50"] <= oof["throughput_tok_s_q90"]).all()


def test_cqr_offset_score_and_interval_match_a_hand_derivation():
    """Romano et al. (2019) CQR, worked by hand. Scores 0.1 .. 1.0 (shuffled), alpha 0.2:
    k = ceil((10 + 1) * 0.8) = ceil(8.8) = 9, the 9th smallest = 0.9; alpha 0.5: k =
    ceil(5.5) = 6 -> 0.6. Three scores at alpha 0.2: k = ceil(3.2) = 4 > 3, capped at the
    largest, 0.3 (the implementation's documented cap); none: 0. Interval [q10, q90] = [1, 2]
    (q50 1.5): score max(q10 - y, y - q90) = 1, -0.25, 1 for y = 0, 1.25, 3; with offset 0.5
    the closed band [0.5, 2.5] holds 0.5, 1.5 and 2.5, not 0.49 or 2.51. Dropping the "+1"
    gives 0.8 / 0.5; an offset on one side only, or an open band, fails the edges."""
    scores = np.array([0.7, 0.1, 1.0, 0.4, 0.9, 0.2, 0.6, 0.3, 0.8, 0.5])
    assert model.conformal_offset(scores, 0.2) == 0.9
    assert model.conformal_offset(scores, 0.5) == 0.6
    assert model.conformal_offset(np.array([0.3, 0.1, 0.2]), 0.2) == 0.3
    assert model.conformal_offset(np.array([]), 0.2) == 0.0
    pred = np.array([[1.0, 1.5, 2.0]])
    np.testing.assert_array_equal(model._scores(np.repeat(pred, 3, axis=0),
                                                np.array([0.0, 1.25, 3.0])), [1.0, -0.25, 1.0])
    y = np.array([0.49, 0.5, 1.5, 2.5, 2.51])
    np.testing.assert_array_equal(model._covered(np.repeat(pred, 5, axis=0), y, 0.5),
                                  [False, True, True, True, False])


class _ConstBooster:
    """A stand-in for a LightGBM booster that predicts one log-space value for every row."""

    def __init__(self, value: float):
        self.value = value

    def predict(self, X, num_threads=1):
        return np.full(len(X), self.value)


def test_predict_sorts_offsets_and_names_quantile_columns_by_hand():
    """Raw log-space predictions q10 = log 200, q50 = log 100, q90 = log 400 (crossed), offset
    log 2: sorted to (log 100, log 200, log 400), the offset widens both ends, so q10 =
    100 / 2 = 50, q50 = 200, q90 = 400 * 2 = 800 W. A swapped column, a missing sort or an
    offset with the wrong sign gives other numbers."""
    qs = {0.1: _ConstBooster(math.log(200)), 0.5: _ConstBooster(math.log(100)),
          0.9: _ConstBooster(math.log(400))}
    cost = model.CostModel(schema={c: [] for c in ("hardware", "precision", "framework", "task")},
                           models={"power_w": qs}, offsets={"power_w": math.log(2)},
                           envelope={}, metrics={}, oof=pd.DataFrame(), rows=0)
    rows = pd.DataFrame([{"hardware": "H100-80GB", "tp": 1, "n_gpus": 1, "pp": 1,
                          "precision": "bf16", "framework": "vllm", "task": "chat",
                          "params_b": 8.0, "active_params_b": None, "in_len": 512.0,
                          "out_len": 256.0, "concurrency": 8.0}] * 2)
    out = model.predict(cost, rows)
    assert list(out.columns) == ["power_w_q10", "power_w_q50", "power_w_q90"]
    np.testing.assert_allclose(out.to_numpy(), [[50.0, 200.0, 800.0]] * 2, rtol=1e-12)


def test_held_out_predictions_carry_the_conformal_offset(adv):
    """The stored out-of-fold intervals are the grouped-CV quantiles widened by the offset, the
    ceil((n + 1)(1 - alpha))-th smallest of the same n scores, so they cover exactly k = ceil((n
    + 1) * 0.8) of the n rows (one row of slack for the log/exp round trip at the k-th score).
    An offset with the wrong sign or on one side only covers hundreds of rows fewer."""
    oof = adv.cost.oof
    for target in ("throughput_tok_s", "itl_ms", "power_w"):
        rows = oof.dropna(subset=[f"{target}_q10", target])
        n, k = len(rows), math.ceil((len(rows) + 1) * 0.8)
        covered = int(((rows[target] >= rows[f"{target}_q10"])
                       & (rows[target] <= rows[f"{target}_q90"])).sum())
        assert abs(covered - k) <= 1, (target, n, covered, k)


def test_held_out_cell_and_random_fold_coverage_are_both_reported(adv):
    """OmniPilot Sec. 3.2 / Table 4: the held-out-cell offset covers unseen workload cells at
    the nominal 80 %, the random-fold offset under-covers them (64-69 %). Both are measured
    here on the same grouped-CV predictions of unseen cells (random fold: the offset from
    ``KFold`` residuals applied to them). On the staged data (snapshot, not a derivation)
    held-out-cell / random-fold coverage is 0.801 / 0.791 (throughput), 0.800 / 0.812 (ITL),
    0.811 / 0.820 (power): the paper's 11-16 point gap does not reproduce (no relation holds
    with margin in either direction; a likely reason: cells hold 1.7-5.5 rows on average here,
    so a random fold leaks little of a cell), so the test pins only that both stay within 5
    points of each other and of nominal. How each is computed is derived by hand in
    ``tests/advisor/test_advisor_folds.py`` (a fold runner given by hand)."""
    for target in ("throughput_tok_s", "itl_ms", "power_w"):
        cov = adv.cost.metrics[target]["coverage"]
        assert {"held_out_cell", "random_fold", "raw", "nominal"} <= set(cov)
        assert 0 <= cov["held_out_cell"] <= 1 and 0 <= cov["random_fold"] <= 1
        assert abs(cov["random_fold"] - cov["held_out_cell"]) < 0.05
        assert abs(cov["held_out_cell"] - cov["nominal"]) < 0.05
        assert abs(cov["random_fold"] - cov["nominal"]) < 0.05


def test_ttft_is_fitted_with_one_fold_per_cell_on_the_argonne_tables(bench_db):
    """Issue 18 item 6: the Argonne TTFT table (Fig. 22) measures TTFT in 3 workload cells
    (one per model at 1024 input tokens, batch 16), fewer than the 5 folds of the other
    targets: TTFT is fitted with min(5, 3) = 3 grouped folds, i.e. leave-one-cell-out, and says
    so; its support is that one operating point. A target with fewer than 3 cells is not
    fitted and says why."""
    con = store.connect(bench_db)
    runs = store.bench_runs(con)
    con.close()
    p = model.FitParams(targets=("ttft_ms",))
    df = model.prepare(runs)
    has = df[df["ttft_ms"].notna() & (df["ttft_ms"] > 0)]
    assert has["cell"].nunique() == 3 < p.n_splits  # the premise, from the data
    cost = model.fit(runs, p)
    m = cost.metrics["ttft_ms"]
    assert m["fitted"] and m["folds"] == 3 and m["cells"] == 3 and m["rows"] == len(has)
    assert 0 <= m["coverage"]["held_out_cell"] <= 1 and m["coverage"]["nominal"] == 0.8
    assert m["support"]["numeric"]["in_len"] == [1024.0, 1024.0]
    assert m["support"]["numeric"]["concurrency"] == [16.0, 16.0]
    oof = cost.oof[cost.oof["ttft_ms"].notna()]
    assert oof["ttft_ms_q50"].notna().all()  # every measured row has a held-out prediction
    two = runs[runs["model"].isin(has["model"].unique()[:2])]
    m2 = model.fit(two, p).metrics["ttft_ms"]
    assert m2["fitted"] is False and m2["cells"] == 2 and "3 cells" in m2["reason"]


# ------------------------------------------------------------------ decisions
def test_405b_never_ranks_an_infeasible_arm(adv):
    req = decide.Request("meta-llama/Llama-3.1-405B-Instruct", 405, 64, 1024, 512)
    scored = decide.advise(adv.cost, req, decide.UtilityParams(), adv.ctx)
    ranked = scored[scored["rank"].notna()]
    assert len(ranked) >= 1 and ranked["feasible"].all() and not ranked["abstain"].any()
    # bf16 weights (810 GB) fit no 8 x 80 GB H100 node
    h100_bf16 = scored[(scored["hardware"] == "H100-80GB") & (scored["precision"] == "bf16")]
    assert not h100_bf16["feasible"].any() and h100_bf16["rank"].isna().all()
    assert ranked.iloc[0]["hardware"] == "H100-80GB" and ranked.iloc[0]["precision"] == "fp8"


def test_abstains_outside_envelope_and_names_the_axis(adv):
    req = decide.Request("huge", 5000, 8, 512, 128)
    scored = decide.advise(adv.cost, req, decide.UtilityParams(), adv.ctx)
    assert scored["abstain"].all() and scored["rank"].isna().all()
    known = scored[scored["hardware"] == "H100-80GB"]
    measured = known["precision"].isin(["bf16", "fp16", "fp8"])
    assert known.loc[measured, "abstain_axis"].str.startswith("params_b 5000 outside").all()
    # AWQ / GPTQ are measured nowhere in the staged data: outside support on the precision axis
    assert known.loc[known["precision"].isin(["awq", "gptq"]), "abstain_axis"].str.match(
        r"precision '(awq|gptq)' was never measured").all()
    req = decide.Request("meta-llama/Llama-3.1-8B-Instruct", 8, 64, 1024, 256)
    scored = decide.advise(adv.cost, req, decide.UtilityParams(), adv.ctx)
    h200 = scored[scored["hardware"] == "H200-141GB"]  # no H200 in the staged benchmarks
    assert h200["abstain"].all()
    assert h200["abstain_axis"].str.contains("hardware 'H200-141GB' was never measured").all()


def _constructed_bench(n_cells: int = 30) -> pd.DataFrame:
    """Cells where H100 x1 serves 8x the tokens of A100 x1: with a high value per token the
    best arm is known to be H100 x1 everywhere."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n_cells):
        conc, params = float(2 ** (i % 8)), float(7 + (i % 5))
        for hw, mem, tput in (("A100-40GB", 40, 500.0), ("H100-80GB", 80, 4000.0)):
            rows.append({"source": "test", "task": "t", "hardware": hw, "gpu_mem_gb": mem,
                         "n_gpus": 1, "tp": 1, "pp": 1, "precision": "bf16",
                         "framework": "vLLM", "model": f"m{i}", "params_b": params,
                         "active_params_b": params, "in_len": 512.0, "out_len": 128.0,
                         "concurrency": conc, "failed": False,
                         "throughput_tok_s": tput * (1 + 0.05 * rng.standard_normal()),
                         "ttft_ms": None, "itl_ms": None, "latency_s": None,
                         "power_w": None, "energy_per_token_j": None})
    return pd.DataFrame(rows)


def test_constructed_case_ranks_the_known_best_arm_first():
    cost = model.fit(_constructed_bench(), model.FitParams(targets=("throughput_tok_s",)))
    u = decide.UtilityParams(value_per_token_usd=1e-5)
    req = decide.Request("m3", 9.0, 8.0, 512, 128, task="t")
    scored = decide.advise(cost, req, u)
    best = scored[scored["rank"] == 1].iloc[0]
    assert (best["hardware"], best["tp"]) == ("H100-80GB", 1)
    bt = advisor_backtest.backtest(cost, u)
    assert bt["cells"] == 30 and bt["policies"]["advisor"]["top1"] == 1.0
    assert bt["policies"]["advisor"]["regret"] == 0.0
    assert bt["policies"]["size_rule"]["top1"] == 0.0  # the size rule prefers the A100


def test_kv_saturation_penalty_and_feasibility():
    u = decide.UtilityParams()
    assert decide.kv_factor(0.8, u) == 1.0
    assert decide.kv_factor(0.95, u) == pytest.approx(1 - 2.0 * 0.10)
    assert decide.kv_factor(1.5, u) == decide.kv_factor(1.0, u) == pytest.approx(0.7)
    # 4,096 sequences of 8,192 tokens overflow 8 x H100's cache: capped, not infeasible
    req = decide.Request("m", 70, 4096, 4096, 4096)
    chk = decide.memory_check(req, {"hardware": "H100-80GB", "tp": 8, "precision": "bf16"}, u)
    assert chk["feasible"] and chk["kv_note"].startswith("KV cache holds ")
    assert chk["kv_note"].endswith(" of 4096 concurrent sequences") and chk["occupancy"] > 1


def test_no_measured_run_is_called_infeasible(adv, adv_backtest):
    """Every staged benchmark row with a measured throughput ran, so the memory model must
    call none infeasible (before the fix: 21 backtest arms, mostly 70B on 4 x A100-40GB);
    the runs whose KV cache is smaller than their concurrency are capped instead."""
    o = adv.cost.oof[adv.cost.oof["throughput_tok_s"].notna()]
    u = decide.UtilityParams()
    mems = [decide.memory_fit(float(r.params_b), float(r.concurrency),
                              float(r.in_len) + float(r.out_len),
                              {"hardware": r.hardware, "tp": r.tp, "precision": r.precision,
                               "n_gpus": None if pd.isna(r.n_gpus) else int(r.n_gpus)}, u)
            for r in o.itertuples()]
    assert len(mems) > 1000 and [m["why"] for m in mems if not m["feasible"]] == []
    assert sum(bool(m["kv_note"]) for m in mems) > 0
    assert adv_backtest["terms"]["infeasible_measured_arms"] == 0
    assert adv_backtest["terms"]["kv_capped_arms"] > 0


@pytest.fixture(scope="session")
def adv_backtest(adv):
    """The backtest of the session's fitted advisor (a few seconds: computed once)."""
    return advisor_backtest.backtest(adv.cost, decide.UtilityParams(), adv.ctx)


def test_real_backtest_reports_all_policies(adv_backtest):
    bt = adv_backtest
    assert bt["cells"] > 50
    assert set(bt["policies"]) == {"advisor", "advisor_ignoring_memory_model", "size_rule",
                                   "h100_fp8_recipe", "throughput_max", "nearest_neighbour",
                                   "cheapest_fit"}
    for p in bt["policies"].values():
        assert 0 <= p["top1"] <= 1 and p["regret"] >= 0
        # issue 18 item 3: 95 % bootstrap intervals over cells contain the point estimates
        assert p["top1_ci95"][0] <= p["top1"] <= p["top1_ci95"][1]
        assert p["regret_ci95"][0] <= p["regret"] <= p["regret_ci95"][1]
    assert bt["bootstrap"] == {"resamples": 1000, "seed": 0, "level": 0.95,
                               "method": "percentile bootstrap over cells"}
    # the KV term is live: the Argonne cells measure input lengths, so occupancies are known
    assert bt["terms"]["kv_arms"] > 0 and bt["terms"]["kv_penalised_arms"] > 0
    # issue 33 (was: only the weakest baseline): no baseline has less regret than the advisor;
    # at the paper's 2e-7 USD per token cheapest-fit ties it (the cost terms dominate there)
    regret = {k: v["regret"] for k, v in bt["policies"].items()}
    baselines = {k: v for k, v in regret.items() if not k.startswith("advisor")}
    assert regret["advisor"] <= min(baselines.values()) + 1e-12, regret
    assert regret["advisor"] < regret["throughput_max"]
    # the page and the CLI say it: the best baseline, and whether it ties
    from analytics.services import advisor as advisor_service

    verdict = advisor_service.backtest_verdict(bt, 2e-7)
    best = min(baselines, key=baselines.get)
    assert verdict["best_baseline"] == best and verdict["baseline_regret"] == baselines[best]
    assert verdict["tie"] == (baselines[best] <= regret["advisor"] + 1e-9)
    assert ("ties the advisor" in verdict["text"]) == verdict["tie"]
    assert verdict["tie"] and best == "cheapest_fit"  # measured on the staged data at 2e-7


# ------------------------------------------------------------------ value per token (item 4)
def _hand_arm(thr: float) -> dict:
    u = decide.UtilityParams(prices_usd_per_gpu_h={"H100-80GB": 4.0}, usd_per_kwh=0.1,
                             runtime_h=2.0)
    terms = decide.utility(thr, 700.0, 1, "H100-80GB", 0.9, 0.1, 0.9, 0.25, u)
    return {"hardware": "H100-80GB", "tp": 1, "precision": "bf16", **terms}


def test_break_even_matches_the_hand_derivation():
    """One arm: H100 x1 at 4 USD/GPU-h, 700 W at 0.1 USD/kWh, 1000 tok/s, occupancy 0.9
    (KV factor 1 - 2 x (0.9 - 0.85) = 0.9), P(SLO violated) 0.1, P(launch) 0.9, wait 0.25 h,
    runtime 2 h, queue weight 1, restart 0.5 h::

        rate = 1 x 4 + 700 / 1000 x 0.1           = 4.07 USD/h
        C    = 4.07 x 2 + 1 x 0.25 x 4.07 + (1 - 0.9) x 0.5 x 4.07
             = 8.14 + 1.0175 + 0.2035             = 9.361 USD
        S    = 1000 x 0.9 x (1 - 0.1) x 3600 x 2  = 5,832,000 tokens
        U(v) = v S - C = 0  <=>  v* = 9.361 / 5,832,000 = 1.60511e-6 USD/token

    A second arm at half the throughput breaks even at twice that (S halves, C unchanged), so
    the ranking's break-even is the first arm's."""
    a, b = _hand_arm(1000.0), _hand_arm(500.0)
    assert a["served_tokens"] == pytest.approx(5_832_000)
    assert a["compute_usd"] + a["queue_usd"] + a["failure_usd"] == pytest.approx(9.361)
    scored = pd.DataFrame([{**b, "rank": 2.0}, {**a, "rank": 1.0}])
    be = value.break_even(scored)
    assert be["value_per_token_usd"] == pytest.approx(9.361 / 5_832_000, rel=1e-12)
    assert be["value_per_token_usd"] == pytest.approx(1.60511e-6, rel=1e-5)
    assert be["arm"] == "H100-80GB x1 bf16" and be["reason"] is None
    assert value.decision(scored)["decision"] == "do_not_launch"  # at the default 2e-7
    sens = value.sensitivity(scored, [1e-6, 1e-5])
    # 1e-6: 5.832 - 9.361 = -3.529 (the slower arm: 2.916 - 9.361); 1e-5: 58.32 - 9.361
    assert sens["best_utility_usd"].tolist() == pytest.approx([-3.529, 48.959])
    assert sens["decision"].tolist() == ["do_not_launch", "launch"]
    assert sens["positive_arms"].tolist() == [0, 2]
    assert value.grid_for(be["value_per_token_usd"]) is value.GRID_USD  # 1e-8 .. 1e-5
    assert value.grid_for(2.23e-5)[[0, -1]] == pytest.approx([1e-8, 1e-4])  # shows the crossing
    none = value.break_even(scored.assign(rank=np.nan))
    assert none["value_per_token_usd"] is None and "no arm is ranked" in none["reason"]


def test_real_request_does_not_launch_below_break_even(adv):
    req = decide.Request("meta-llama/Llama-3.1-8B-Instruct", 8, 64, 1024, 512)
    scored = decide.advise(adv.cost, req, decide.UtilityParams(), adv.ctx)
    assert value.decision(scored)["decision"] == "do_not_launch"
    v_star = value.break_even(scored)["value_per_token_usd"]
    assert v_star > 2e-7
    # at the break-even the best arm's utility is 0; just above it the answer is "launch"
    at = decide.advise(adv.cost, req, decide.UtilityParams(value_per_token_usd=v_star), adv.ctx)
    assert at[at["rank"] == 1]["utility"].iloc[0] == pytest.approx(0.0, abs=1e-9)
    above = decide.advise(adv.cost, req, decide.UtilityParams(value_per_token_usd=v_star * 1.01),
                          adv.ctx)
    assert value.decision(above)["decision"] == "launch"
    # the sensitivity pass agrees with re-scoring at each grid value
    sens = value.sensitivity(scored, [1e-8, 1e-6, 1e-5])
    for v, best in zip(sens["value_per_token_usd"], sens["best_utility_usd"], strict=True):
        again = decide.advise(adv.cost, req, decide.UtilityParams(value_per_token_usd=v), adv.ctx)
        assert again["utility"][again["rank"] == 1].iloc[0] == pytest.approx(best, rel=1e-9)


# ------------------------------------------------------------------ abstained arms (item 5)
def test_abstained_arms_are_listed_after_the_ranked_ones_and_flagged(adv):
    req = decide.Request("meta-llama/Llama-3.1-8B-Instruct", 8, 64, 1024, 512)
    scored = decide.advise(adv.cost, req, decide.UtilityParams(), adv.ctx)
    rankable = scored["feasible"] & ~scored["abstain"] & scored["utility"].notna()
    n = int(rankable.sum())
    # ranks of measured arms: 1..n by utility, first in the table (unchanged behaviour)
    assert scored["rank"].head(n).tolist() == list(range(1, n + 1))
    assert scored["utility"].head(n).is_monotonic_decreasing
    assert (scored["support"].head(n) == "measured").all()
    rest = scored.iloc[n:]
    flagged = rest[rest["abstain"] & rest["feasible"] & rest["utility"].notna()]
    assert len(flagged) > 0 and flagged["rank"].isna().all()
    assert flagged.index.tolist() == list(range(n, n + len(flagged)))  # right after the ranked
    assert flagged["utility"].is_monotonic_decreasing
    h200 = scored[scored["hardware"] == "H200-141GB"]
    assert (h200["support"] == "outside measured support (axis hardware)").all()
    # an unmeasured arm predicted better than the best ranked one is never first, only warned
    better = bool(flagged["utility"].iloc[0] > scored["utility"].iloc[0])
    assert (value.support_warning(scored) is not None) == better


def test_support_warning_names_a_better_unmeasured_arm():
    ranked = {**_hand_arm(1000.0), "rank": 1.0, "feasible": True, "abstain": False,
              "abstain_axis": "", "support": "measured"}
    out = {**_hand_arm(2000.0), "precision": "fp8", "rank": np.nan, "feasible": True,
           "abstain": True, "abstain_axis": "precision fp8 was never measured on H100-80GB",
           "support": "outside measured support (axis precision)"}
    warn = value.support_warning(pd.DataFrame([ranked, out]))
    assert warn.startswith("H100-80GB x1 fp8 is predicted better")
    assert "outside measured support (axis precision)" in warn and "not ranked" in warn
    worse = {**out, **{k: v for k, v in _hand_arm(500.0).items() if k != "precision"}}
    assert value.support_warning(pd.DataFrame([ranked, worse])) is None
    alone = value.support_warning(pd.DataFrame([{**ranked, "rank": np.nan}, out]))
    assert "no arm is ranked" in alone


# ------------------------------------------------------------------ promotion gate
def test_promotion_gate_records_versions(adv, tmp_path):
    con = store.connect(tmp_path / "gate.duckdb")
    first = advisor_service.record_model_version(con, adv)
    assert first["promoted"] and first["reason"] == "first fit always promotes"
    second = advisor_service.record_model_version(con, adv)  # same MAPE, same rows: passes
    assert second["promoted"] and second["version"] == first["version"] + 1
    current = gate.incumbent(store.model_versions(con))
    worse = gate.should_promote(first["mape_pct"] + 0.6, first["rows"], current)
    assert worse[0] is False and "regresses" in worse[1]
    fewer = gate.should_promote(first["mape_pct"], first["rows"] - 1, current)
    assert fewer[0] is False
    v = advisor_service.model_versions(con)
    assert v["version"].tolist() == [second["version"], first["version"]]
    con.close()


# ------------------------------------------------------------------ lookup tables, disk cache
def test_lookup_tables_answer_like_the_pandas_filters(adv):
    pri, waits = adv.ctx.priors, adv.ctx.waits
    for n in range(0, 20):  # counts with and without history: nearest count, prior mean
        hit = pri[pri["n_gpus"] == n]
        want = (float(np.average(hit["posterior_mean"], weights=hit["trials"])) if len(hit)
                else float(pri["prior_mean"].iloc[0]))
        assert adv.ctx.launch.get(n) == want
        w = waits.iloc[[int(np.argmin(np.abs(waits["n_gpus"] - n)))]]
        assert adv.ctx.wait_h(n) == float(w["median_wait_h"].iloc[0])
    kind, n = pri["gpu_kind"].iloc[0], int(pri["n_gpus"].iloc[0])
    assert priors.success_for(pri, n, kind) == float(pri["posterior_mean"].iloc[0])
    # the normal tail without scipy.stats: bit-identical to stats.norm
    lo, hi = np.exp(np.linspace(-3, 1, 401)), np.exp(np.linspace(-1, 3, 401))
    want = [stats.norm.sf((math.log(2.0) - math.log(1.0))
                          / max((math.log(h) - math.log(v)) / (2 * stats.norm.ppf(0.9)), 1e-9))
            for v, h in zip(lo, hi, strict=True)]
    assert np.array_equal(decide.p_exceed_many(lo, np.ones_like(lo), hi, 2.0), want)


def test_stored_fit_gives_the_same_numbers(adv, adv_backtest, tmp_path):
    ledger = pd.DataFrame({"dataset_id": [1, 2], "name": ["b", "j"],
                           "kind": ["bench_runs", "jobs"], "format": ["f", "g"],
                           "rows": [10, 20], "sha256": ["s1", "s2"],
                           "ingested_at": ["t1", "t2"]})
    key, inputs = persist.cache_key(ledger, adv.cost.params)
    moved = ledger.assign(ingested_at=["t1", "t3"])  # a re-ingested job history moves the key
    assert persist.cache_key(moved, adv.cost.params)[0] != key
    # the same benchmark file in another store (another id, name and time): the same key
    elsewhere = ledger.assign(dataset_id=[7, 2], name=["b2", "j"], ingested_at=["t9", "t2"])
    assert persist.cache_key(elsewhere, adv.cost.params)[0] == key
    other = ledger.assign(sha256=["s3", "s2"])  # other benchmark bytes: another key
    assert persist.cache_key(other, adv.cost.params)[0] != key
    assert persist.cache_key(ledger, model.FitParams(seed=1))[0] != key
    assert persist.load(tmp_path, key) is None
    assert persist.save(adv, tmp_path, key, inputs)
    assert not list(tmp_path.glob("*/*.pkl")) and not list(tmp_path.glob(".*"))  # no temp left
    back = persist.load(tmp_path, key)
    u = decide.UtilityParams()
    req = decide.Request("meta-llama/Llama-3.1-8B-Instruct", 8, 64, 1024, 256, itl_slo_ms=50)
    pd.testing.assert_frame_equal(decide.advise(back.cost, req, u, back.ctx),
                                  decide.advise(adv.cost, req, u, adv.ctx), check_exact=True)
    pd.testing.assert_frame_equal(back.cost.oof, adv.cost.oof, check_exact=True)
    pd.testing.assert_frame_equal(back.ctx.priors, adv.ctx.priors, check_exact=True)
    assert back.cost.metrics == adv.cost.metrics and back.jobs_rows == adv.jobs_rows
    assert advisor_backtest.backtest(back.cost, u, back.ctx) == adv_backtest
    (tmp_path / key / "manifest.json").write_text("{")  # a damaged entry is a miss
    assert persist.load(tmp_path, key) is None
    assert persist.save(adv, tmp_path, key, inputs) and persist.load(tmp_path, key) is not None


# ------------------------------------------------------------------ CLI
def test_cli_advise_and_backtest(bench_db, capsys):
    code = cli.main(["--db", str(bench_db), "advise", "--model",
                     "meta-llama/Llama-3.1-405B-Instruct", "--params-b", "405",
                     "--concurrency", "64", "--in-len", "1024", "--out-len", "512"])
    doc = strict_loads(capsys.readouterr().out)
    assert code == 0
    ranked = [a for a in doc["arms"] if a["rank"] is not None]
    assert ranked and all(a["feasible"] and not a["abstain"] for a in ranked)
    assert {"q10", "q50", "q90"} == set(ranked[0]["throughput_tok_s"])
    assert doc["arms"][0]["rank"] == 1
    assert doc["model_cache"] == "miss"  # fitted, then stored beside the store
    # issue 17: its fold fits ran as sweep tasks (5 targets x grouped + random folds; TTFT 3)
    # on the local pool and were kept in sweep_runs
    run = doc["fold_sweep"]
    assert (run["tasks"], run["computed"], run["backend"]) == (46, 46, "local")
    assert doc["decision"] in ("launch", "do_not_launch")
    assert doc["break_even_value_per_token"] > 0 and doc["break_even_reason"] is None
    flagged = [a for a in doc["arms"][len(ranked):] if a["abstain"]]
    assert doc["arms"][:len(ranked)] == ranked and flagged
    assert all(a["support"].startswith("outside measured support (axis ") for a in flagged)
    # issue 18 item 6: each SLO says whether it has a model and where it extrapolates
    ttft = doc["slo_models"]["ttft_ms"]
    assert ttft["fitted"] and ttft["folds"] == ttft["cells"] == 3
    assert ttft["outside_support"].startswith("task 'lm-arena-chat' was never measured")
    assert doc["slo_models"]["itl_ms"]["folds"] == 5
    code = cli.main(["--db", str(bench_db), "advisor-backtest"])
    doc = strict_loads(capsys.readouterr().out)
    assert code == 0 and len(doc["policies"]) == 7
    assert all(len(p["top1_ci95"]) == len(p["regret_ci95"]) == 2
               for p in doc["policies"].values())
    assert doc["bootstrap"]["resamples"] == 1000 and doc["terms"]["slo"]["itl_ms"] is None
    assert doc["slos_without_model"] == []  # TTFT fitted with 3 folds, ITL with 5
    assert doc["model_cache"] == "hit" and doc["fold_sweep"] is None  # same data, same fit
    assert set(doc["coverage"]) >= {"held_out_cell", "random_fold"}
    assert doc["model_version"]["promoted"] is True
    code = cli.main(["--db", str(bench_db), "advise", "--model", "x", "--params-b", "8",
                     "--concurrency", "8", "--in-len", "10", "--out-len", "10",
                     "--price", "B200=abc"])
    assert code == 2 and "--price" in strict_loads(capsys.readouterr().out)["error"]


def test_the_benchmarks_reference_path_scores_exactly_like_advise(adv):
    """``bench/bench_advisor.py`` times ``advise`` against a per-arm pandas path that must give
    the product's output exactly (its equality check ends the bench otherwise): a change to the
    ranking's columns or terms that the reference misses fails here, not in ``make bench``."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "bench_advisor.py"
    spec = importlib.util.spec_from_file_location("bench_advisor", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    u = decide.UtilityParams()
    fast = decide.advise(adv.cost, bench.REQUEST, u, adv.ctx)
    pd.testing.assert_frame_equal(fast, bench.naive_advise(adv.cost, bench.REQUEST, u, adv.ctx),
                                  check_exact=True)
    assert len(fast) == 264 and fast["rank"].notna().any()
