"""Placement page (launch advisor) through AppTest, on real ML.ENERGY runs and Slurm history."""

from __future__ import annotations

from harness import metrics, new_app, seed


def test_placement_without_benchmarks_says_how_to_add_them(app_env):
    at = new_app().run()
    at.switch_page("pages/placement.py").run()
    assert not at.exception
    assert at.title[0].value == "Placement"
    assert "No benchmark data yet" in at.info[0].value


def test_placement_ranks_arms_and_abstains_for_a_huge_model(app_env):
    seed(app_env["db"], "ml_energy/leaderboard_v2/llm_text_generation_runs.csv",
          "mit_supercloud/slurm-log-queueing-clean.csv")
    at = new_app().run()
    at.switch_page("pages/placement.py").run()
    assert not at.exception
    # issue 31 item 6: no fit stored for this data: the measured support first, the fit asked
    assert [c.key for c in at.get("plotly_chart")] == ["support_chart"] and not at.metric
    assert any("not fitted on these" in i.value for i in at.info)
    at.button(key="advisor_fit_run").click().run()
    assert not at.exception
    # issue 17: how the cost model was obtained (its fold fits on the sweep runner, or stored)
    fit = next(c.value for c in at.caption if c.value.startswith("Cost model:"))
    assert "out-of-fold fits" in fit or "stored for this data" in fit
    downloads = {b.key for b in at.get("download_button")}  # issue 19 item 12
    assert {"placement_report", "dl_arms_chart_csv", "dl_arms_chart_parquet"} <= downloads
    shown = metrics(at)
    assert int(shown["ranked arms"]) > 0
    assert shown["best arm"] != "none"
    assert at.selectbox(key="adv_model").value == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    assert at.number_input(key="adv_p_meta-llama/Meta-Llama-3.1-8B-Instruct").value == 8.0
    # issue 18 item 4: at 2e-7 USD per token every ranked arm loses money: the page says so,
    # with the break-even value, and traces the best arm over value per token
    no = [w.value for w in at.warning if "Do not launch at this value per token" in w.value]
    assert len(no) == 1 and "Break-even value per token" in no[0]
    # issue 31 item 7: the break-even also as USD per 1M output tokens, and the next step
    assert "USD per 1M output tokens" in no[0] and "Next step: at a value above" in no[0]
    best = next(d.value for d in at.dataframe if "throughput_tok_s_q10" in d.value).iloc[0]
    wide = [c.value for c in at.caption if "q10-q90 throughput spans" in c.value]
    ratio = best["throughput_tok_s_q90"] / best["throughput_tok_s_q10"]
    assert bool(wide) == (ratio >= 3.0)  # a wide interval is explained, a narrow one is not
    assert not wide or "calibrated on cells it did not see" in wide[0]
    sens = next(d.value for d in at.dataframe if "best_utility_usd" in d.value)
    assert len(sens) == 20 and set(sens["decision"]) == {"launch", "do_not_launch"}
    # item 5: abstained arms are listed after the ranked ones, flagged, with their utility
    arms = next(d.value for d in at.dataframe if "support" in d.value)
    n = int(shown["ranked arms"])
    assert (arms["support"].head(n) == "measured").all()
    assert arms["support"].iloc[n].startswith("outside measured support (axis ")
    # launch priors from the Slurm history are shown
    assert any(d.value.shape[0] == 6 for d in at.dataframe if "posterior_mean" in d.value)
    # issue 18 item 3: the backtest table gives bootstrap 95 % intervals around each figure
    bt = next(d.value for d in at.dataframe if "top-1 95% CI low" in d.value)
    assert "advisor" in set(bt["policy"])
    assert (bt["top-1 95% CI low"] <= bt["top-1"]).all() and (
        bt["top-1"] <= bt["top-1 95% CI high"]).all()
    assert (bt["regret 95% CI low"] <= bt["regret"]).all()
    # item 6: ML.ENERGY v2 measures no TTFT, so the page says a TTFT SLO has no model
    notes = [i.value for i in at.info if i.value.startswith("SLO models: no ttft")]
    assert len(notes) == 1 and "model (0 rows in 0 workload cells" in notes[0]
    # issue 18 item 7: the calibration table shows held-out-cell and random-fold coverage
    cal = next(d.value for d in at.dataframe if "coverage random fold" in d.value)
    thr = cal.loc["throughput_tok_s"]
    assert 0 <= thr["coverage held-out cell"] <= 1 and 0 <= thr["coverage random fold"] <= 1

    # issue 19 item 7: picking a catalogue model fills its size at once (no submit needed) ...
    big = next(m for m in at.selectbox(key="adv_model").options if "70B" in m)
    at.selectbox(key="adv_model").set_value(big).run()
    assert at.number_input(key=f"adv_p_{big}").value == 70.0
    # ... and the custom size typed before the first submit is the one ranked
    at.selectbox(key="adv_model").set_value("(custom model)").run()
    at.number_input(key="adv_p_(custom model)").set_value(4000.0)
    at.button[0].click().run()  # the form's submit button, once
    assert not at.exception
    shown = metrics(at)
    assert shown["ranked arms"] == "0" and shown["best arm"] == "none"
    assert "abstains" in at.warning[0].value and "params_b 4000" in at.warning[0].value
    # issue 31 item 7: a 4-bit fallback is never called 16-bit
    at.number_input(key="adv_p_(custom model)").set_value(1000.0)  # 1,000 B: the fallback is AWQ
    at.button[0].click().run()
    fallback = at.warning[0].value
    assert fallback.endswith("**A100-80GB x8 awq**")
    assert "no 16-bit arm fits, this one has 4-bit weights" in fallback


def test_a_wide_interval_is_explained():
    """Issue 31 item 7: a 15x q10-q90 on the best arm comes with why (the formatter on the
    metrics a fit records: rows, cells, the held-out-cell offset, the error)."""
    import math
    from types import SimpleNamespace

    import pandas as pd

    from analytics.ui import whatifs

    fit = SimpleNamespace(cost=SimpleNamespace(metrics={"throughput_tok_s": {
        "rows": 1200, "cells": 87, "offset_log": {"held_out_cell": math.log(2.5)},
        "mape_pct": 31.0}}))
    wide = pd.DataFrame({"throughput_tok_s_q10": [100.0], "throughput_tok_s_q90": [1500.0]})
    note = whatifs.interval_width_note(fit, wide)
    assert note.startswith("The best arm's q10-q90 throughput spans 15x (100 to 1,500 tok/s)")
    assert "1,200 runs in 87 workload cells" in note and "x2.5 on each side" in note
    narrow = wide.assign(throughput_tok_s_q90=[200.0])
    assert whatifs.interval_width_note(fit, narrow) is None
