"""Launch advisor, issue 18 items 2, 3 and 6: launch priors per (GPU kind, GPU count) shrunk
to the pool, the backtest's KV / SLO terms and bootstrap intervals, and quantised arms where
the staged Argonne quantisation tables measure them."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import shared

from analytics import store
from analytics.advisor import backtest as advisor_backtest
from analytics.advisor import decide, model, priors
from analytics.ingest import files as ingest


def test_launch_prior_is_per_gpu_kind_and_count_shrunk_to_the_pool():
    """Issue 18 item 2 (OmniPilot Sec. 3.3.2 / 5.2): 4 x H100 and 4 x A100 get their own
    launch priors when their job histories differ, each the beta-binomial posterior mean
    (s + a) / (n + a + b); a kind with few jobs is pulled toward the pooled prior mean by
    w = (a + b) / (n + a + b) of the way from its raw rate (hand-computed below from the
    fitted a, b); a kind without history at that count gets the count pooled over kinds."""
    def jobs_of(kind, n_gpus, ok, bad):
        return pd.DataFrame({"gpu_kind": kind, "n_gpus": n_gpus,
                             "state": ["COMPLETED"] * ok + ["FAILED"] * bad})
    jobs = pd.concat([jobs_of("h100", 4, 16, 24), jobs_of("a100", 4, 32, 8),
                      jobs_of("h100", 1, 45, 5), jobs_of("a100", 1, 40, 10),
                      jobs_of("h200", 4, 3, 0)], ignore_index=True)
    pri = priors.launch_priors(jobs)
    assert set(pri["gpu_kind"]) == {"H100-80GB", "A100-40GB", "H200-141GB"}  # catalog keys
    a, b = pri["prior_a"].iloc[0], pri["prior_b"].iloc[0]
    ctx, u = decide.Context(pri), decide.UtilityParams()
    h100, a100 = ctx.p_launch(4, "H100-80GB", u), ctx.p_launch(4, "A100-40GB", u)
    assert h100 == pytest.approx((16 + a) / (40 + a + b))
    assert a100 == pytest.approx((32 + a) / (40 + a + b))
    assert h100 < 0.5 < a100  # raw 0.40 vs 0.80: different priors for the same GPU count
    # the sparse kind (3 of 3 at x4): pulled from its raw 1.0 toward the prior mean by w
    m, w = a / (a + b), (a + b) / (3 + a + b)
    h200 = ctx.p_launch(4, "H200-141GB", u)
    assert h200 == pytest.approx(1.0 + w * (m - 1.0))
    row = pri[(pri["gpu_kind"] == "H200-141GB") & (pri["n_gpus"] == 4)].iloc[0]
    assert row["shrinkage"] == pytest.approx(w) and row["shrinkage"] > pri["shrinkage"].max() - 1e-12
    assert m == pytest.approx(136 / 183, abs=0.05)  # the prior mean sits at the pooled rate
    # no B200 history at x4: the x4 rate pooled over kinds (trial-weighted posterior means)
    x4 = pri[pri["n_gpus"] == 4]
    assert ctx.p_launch(4, "B200", u) == pytest.approx(
        np.average(x4["posterior_mean"], weights=x4["trials"]))


QUANT = ["llm_inference_bench_argonne/Fig_3__A100_H100_quant_all_results.csv",
         "llm_inference_bench_argonne/Fig_3__qaunt_results__quant_all_results.csv"]


def test_quantised_arms_where_the_argonne_tables_measure_them(tmp_path):
    """Issue 18 item 6: the staged Argonne Fig. 3 quantisation tables measure Llama-3-8B with
    fp16, fp8 and int8 weights (int8 SmoothQuant, ``int8_sq``, on A100 with TensorRT-LLM;
    ``full_prec`` is the fp16 baseline). The arm grid carries int8, AWQ and GPTQ; the int8 arm
    on the A100 is inside measured support and ranked, int8 elsewhere and AWQ / GPTQ (measured
    nowhere in the staged data) abstain, flagged on the precision axis, never ranked."""
    con = store.connect(tmp_path / "q.duckdb")
    ingest.ingest_files(con, [ingest.FileIn(shared(r), shared(r).name) for r in QUANT])
    runs = store.bench_runs(con)
    con.close()
    assert {"full_prec", "int8_sq"} <= set(runs["precision"])  # as the upstream table names
    assert set(model.prepare(runs)["precision"]) == {"fp16", "fp8", "int8"}
    cost = model.fit(runs, model.FitParams(targets=("throughput_tok_s",), n_estimators=30))
    assert "A100-40GB/int8" in cost.envelope["combos"]
    assert not any(c.endswith(("/awq", "/gptq")) for c in cost.envelope["combos"])
    req = decide.Request("meta-llama/Meta-Llama-3-8B", 8, 16, 1024, 1024,
                         task="argonne-offline", framework="TensorRT-LLM")
    scored = decide.advise(cost, req, decide.UtilityParams())
    assert set(scored["precision"]) == {"bf16", "fp16", "fp8", "int8", "awq", "gptq"}
    a100 = scored[(scored["hardware"] == "A100-40GB") & (scored["tp"] == 1)].set_index(
        "precision")
    assert not a100.loc["int8", "abstain"] and a100.loc["int8", "rank"] >= 1
    assert a100.loc["int8", "weights_gb"] == 8.0 and a100.loc["awq", "weights_gb"] == 4.0
    measured_hw = scored["hardware"].isin(["A100-40GB", "H100-80GB"])
    assert scored.loc[~measured_hw, "abstain"].all()  # other GPU kinds: hardware axis
    for prec in ("awq", "gptq"):
        arm = scored[(scored["precision"] == prec) & measured_hw]
        assert arm["abstain"].all() and arm["rank"].isna().all()
        assert arm["abstain_axis"].str.startswith(f"precision '{prec}' was never measured").all()
    h100 = scored[(scored["hardware"] == "H100-80GB") & (scored["precision"] == "int8")]
    assert h100["abstain_axis"].str.startswith(
        "precision int8 was never measured on H100-80GB").all()
    # int8 on the A100 is measured for the 8B model only: a 70B request is outside its support
    assert cost.envelope["combo_params_b"]["A100-40GB/int8"] == [8.0, 8.0]
    env = {**cost.envelope, "numeric": {**cost.envelope["numeric"], "params_b": [2.0, 671.0]}}
    row = {"hardware": "A100-40GB", "precision": "int8", "task": "argonne-offline",
           "framework": "vLLM", "params_b": 70.0, "tp": 1}
    assert model.outside(env, row) == ("precision int8 on A100-40GB was measured for 8-8 B "
                                       "parameters only, not 70 B")
    assert model.outside(env, {**row, "params_b": 8.0}) is None


def _kv_oof(n_cells: int = 4) -> pd.DataFrame:
    """Held-out predictions of cells where an 8B model serves 18 x (4096 + 4096) tokens:
    A100-40GB x1 (1,000 tok/s) fills 0.97 of its KV memory (KV factor 1 - 2 x 0.12 = 0.77),
    H100-80GB x1 (1,200 tok/s) 0.34. At 1e-5 USD per token (value 36 vs 43 USD an hour, price
    4.10 vs 12.29 USD) the A100 is best without the KV term (31.8 vs 30.5 USD), the H100 with
    it (A100 about 23.5 USD)."""
    rows = []
    for i in range(n_cells):
        for hw, thr in (("A100-40GB", 1000.0), ("H100-80GB", 1200.0)):
            rows.append({"cell": f"c{i}", "hardware": hw, "tp": 1, "precision": "bf16",
                         "model": f"m{i}", "task": "t", "params_b": 8.0, "in_len": 4096.0,
                         "out_len": 4096.0, "concurrency": 18.0, "n_gpus": 1,
                         "throughput_tok_s": thr, "throughput_tok_s_q10": thr * 0.9,
                         "throughput_tok_s_q50": thr, "throughput_tok_s_q90": thr * 1.1,
                         "itl_ms": 40.0 if hw == "A100-40GB" else 60.0,
                         "itl_ms_q10": 30.0, "itl_ms_q50": 40.0 if hw == "A100-40GB" else 60.0,
                         "itl_ms_q90": 55.0 if hw == "A100-40GB" else 80.0})
    return pd.DataFrame(rows)


def test_backtest_kv_term_changes_the_chosen_arm():
    """Issue 18 item 3: the backtest scores arms with the live ranking's KV-saturation term
    (knee 0.85), so the knee changes which arm the advisor picks and which one is best; an ITL
    SLO adds the violation term (measured ITL over the SLO: the arm's value is lost)."""
    cost = SimpleNamespace(oof=_kv_oof())
    v = 1e-5
    with_kv = advisor_backtest.backtest(cost, decide.UtilityParams(value_per_token_usd=v))
    no_kv = advisor_backtest.backtest(cost, decide.UtilityParams(value_per_token_usd=v,
                                                                 kv_knee=math.inf))
    u = decide.UtilityParams(value_per_token_usd=v)
    arms_df = advisor_backtest._arms(cost, u)
    advisor_backtest._utilities(arms_df, u, decide.Context(), {"ttft_ms": None, "itl_ms": None})
    a100 = arms_df[arms_df["hardware"] == "A100-40GB"].iloc[0]
    occ = 18 * 8192 * 131_072 / 1e9 / (40 * 2 ** 30 / 1e9 * 0.9 - 16 - 2.6)  # GiB, overhead
    assert a100["occupancy"] == pytest.approx(occ)
    assert a100["kv_factor"] == pytest.approx(1 - 2.0 * (occ - 0.85))
    picks = {}
    for name, uu in (("kv", u), ("none", decide.UtilityParams(value_per_token_usd=v,
                                                              kv_knee=math.inf))):
        df = advisor_backtest._arms(cost, uu)
        advisor_backtest._utilities(df, uu, decide.Context(), {"ttft_ms": None, "itl_ms": None})
        picks[name] = df.loc[advisor_backtest._pick_advisor("c0", df[df["cell"] == "c0"]),
                             "hardware"]
    assert picks == {"kv": "H100-80GB", "none": "A100-40GB"}
    assert with_kv["terms"]["kv_penalised_arms"] == 4 and no_kv["terms"]["kv_penalised_arms"] == 0
    assert with_kv["policies"]["advisor"]["top1"] == no_kv["policies"]["advisor"]["top1"] == 1.0
    # the cheapest-fit baseline (the A100) is right only without the KV term
    assert no_kv["policies"]["cheapest_fit"]["top1"] == 1.0
    assert with_kv["policies"]["cheapest_fit"]["top1"] == 0.0
    # an ITL SLO of 50 ms: the H100's measured 60 ms violates it, so the A100 is best again
    slo = advisor_backtest.backtest(cost, u, itl_slo_ms=50.0)
    assert slo["terms"]["slo"] == {"ttft_ms": None, "itl_ms": 50.0}
    assert slo["policies"]["cheapest_fit"]["top1"] == 1.0
    assert (decide.p_slo(arms_df, {"itl_ms": 50.0}, measured=True) == [0.0, 1.0] * 4).all()


def test_bootstrap_intervals_contain_the_estimate_and_narrow_with_more_cells():
    """Percentile bootstrap of the per-cell mean (1,000 resamples, seed 0): the interval holds
    the mean, is reproducible, and shrinks about as 1 / sqrt(cells) (4x the cells: half the
    width, within the bootstrap's own noise)."""
    pattern = [1.0, 0.0, 1.0, 1.0]  # top-1 hits: mean 0.75
    widths = []
    for reps in (10, 40):
        v = pattern * reps
        lo, hi = advisor_backtest.bootstrap_ci(v)
        assert lo <= np.mean(v) <= hi and advisor_backtest.bootstrap_ci(v) == [lo, hi]
        widths.append(hi - lo)
    assert widths[1] < widths[0] and widths[1] / widths[0] == pytest.approx(0.5, abs=0.1)
    # sd of the mean over 40 cells: sqrt(0.75 x 0.25 / 40) = 0.0685; 95 % width ~ 3.92 sd
    assert widths[0] == pytest.approx(3.92 * math.sqrt(0.75 * 0.25 / 40), rel=0.15)
    few = advisor_backtest.backtest(SimpleNamespace(oof=_kv_oof(4)),
                                    decide.UtilityParams(value_per_token_usd=1e-5))
    many = advisor_backtest.backtest(SimpleNamespace(oof=_kv_oof(40)),
                                     decide.UtilityParams(value_per_token_usd=1e-5))
    assert few["cells"] == 4 and many["cells"] == 40
    assert few["policies"]["size_rule"]["top1_ci95"] == [0.0, 0.0]  # no spread: no width


def test_at_a_higher_value_per_token_the_advisor_beats_every_baseline(adv):
    """Issue 33: at 1e-5 USD per token the advisor's extra terms (SLO, memory, launch priors)
    matter: its regret is strictly below every baseline's."""
    bt = advisor_backtest.backtest(adv.cost, decide.UtilityParams(value_per_token_usd=1e-5), adv.ctx)
    regret = {k: v["regret"] for k, v in bt["policies"].items()}
    baselines = {k: v for k, v in regret.items() if not k.startswith("advisor")}
    assert regret["advisor"] < min(baselines.values()), regret
