"""Placement: which GPU kind x TP degree x precision to launch a model on (OmniPilot paper)."""

import pandas as pd
import streamlit as st
from analytics.ui import cache, charts, scenario, whatifs, widgets
from analytics.ui.export import Export
from analytics.ui.progress import LazyProgress

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Placement")
st.caption("A calibrated, abstaining launch advisor: a LightGBM quantile cost model fitted on the "
           "benchmarks in the store, intervals calibrated on held-out workload cells (CQR), "
           "abstention outside the measured envelope, and arms ranked by expected utility "
           "(OmniPilot paper, Sec. 3).")

catalog = whatifs.bench_catalog()
if catalog.empty:
    st.info("No benchmark data yet. Add ML.ENERGY leaderboard runs, Argonne LLM-Inference-Bench "
            "CSVs or your own `vllm bench serve --save-result` JSON on the Data page (or "
            "`headroom ingest FILE`); the advisor fits on them.")
    widgets.stop()
bench_synth = widgets.warn_synthetic(widgets.synthetic_among((), kind="bench_runs"),
                                     "benchmark runs among the fitted data")
st.plotly_chart(charts.label_synthetic(charts.support_chart(whatifs.bench_support()), bench_synth),
                key="support_chart")
if LazyProgress.cancelled("advisor_fit"):
    st.info("Cost-model fit cancelled. The fold fits that finished are kept in the store; "
            "resuming computes only the rest.")
    if not st.button("Resume the fit", key="advisor_fit_resume"):
        widgets.stop()
elif not st.session_state.get("advisor_fit_asked") and not whatifs.advisor_ready():
    # issue 31 item 6: the fit (minutes on a loaded host) runs when asked, never unasked; a fit
    # stored for this data is read at once
    st.info(f"The cost model is not fitted on these {int(catalog['rows'].sum()):,} benchmark "
            f"runs of {len(catalog):,} model(s) yet: the chart above is what is stored. "
            "Fitting it (LightGBM quantile models, held-out cell calibration; about a minute on "
            "two cores, kept for this data) ranks the arms.")
    if not st.button("Fit the cost model", key="advisor_fit_run", type="primary"):
        widgets.stop()
    st.session_state["advisor_fit_asked"] = True
fit_bar = LazyProgress("Cost-model fold fits", "advisor_fit")
try:
    with st.spinner("Fitting the cost model (once per data version) ..."):
        adv = whatifs.advisor_model(progress=fit_bar)
except ValueError as exc:
    st.error(f"No advisor: {widgets.plain(exc)}")
    widgets.stop()
fit_bar.close()
st.caption(whatifs.advisor_fit_note())

envelope = adv.cost.envelope
models = catalog["model"].tolist()
default_model = next((m for m in models if "Llama-3.1-8B" in m), models[0])
CUSTOM = "(custom model)"
tasks = envelope["categorical"]["task"]

# the model is chosen outside the form, so its size fills the fields at once and a custom
# size typed after choosing "(custom model)" is the one the first "Rank arms" uses
choice = st.selectbox("model", [CUSTOM, *models], index=1 + models.index(default_model),
                      key="adv_model", persist_state="session")
with st.form("request"):
    c1, c2, c3 = st.columns([3, 1, 1])
    row = catalog[catalog["model"] == choice]
    known_p = float(row["params_b"].iloc[0]) if not row.empty else 8.0
    known_a = row["active_params_b"].iloc[0] if not row.empty else None
    name = c1.text_input("custom model name", "my-model", key="adv_custom", persist_state="session") \
        if choice == CUSTOM else choice
    params_b = c2.number_input("parameters (B)", 0.1, 5000.0, known_p, key=f"adv_p_{choice}",
                               persist_state="session")
    active_b = c3.number_input("active parameters (B, MoE)", 0.1, 5000.0,
                               float(known_a) if known_a == known_a and known_a else params_b,
                               key=f"adv_a_{choice}", persist_state="session")
    c4, c5, c6, c7 = st.columns(4)
    task = c4.selectbox("workload family", tasks,
                        index=tasks.index("lm-arena-chat") if "lm-arena-chat" in tasks else 0,
                        key="adv_task",
                        persist_state="session", help="benchmark task whose prompts resemble yours")
    concurrency = c5.number_input("concurrency", 1, 8192, 64, key="adv_conc", persist_state="session")
    in_len = c6.number_input("input tokens", 1, 200_000, 1024, key="adv_in", persist_state="session")
    out_len = c7.number_input("output tokens", 1, 100_000, 512, key="adv_out", persist_state="session")
    c8, c9, c10 = st.columns(3)
    ttft = c8.number_input("TTFT SLO (ms, 0 = none)", 0, 120_000, 0, key="adv_ttft", persist_state="session")
    itl = c9.number_input("ITL SLO (ms, 0 = none)", 0, 10_000, 0, key="adv_itl", persist_state="session")
    value = c10.number_input("value per output token (USD)", 0.0, 1e-3, 2e-7, format="%.1e",
                             key="adv_value",
                             persist_state="session", help="paper default 2e-7 (revealed preference)")
    with st.expander("Prices and utility weights"):
        prices = whatifs.default_prices()
        table = pd.DataFrame([{"hardware": h, "usd_per_gpu_h": prices.get(h)}
                              for h in envelope["categorical"]["hardware"]
                              + [h for h in prices if h not in envelope["categorical"]["hardware"]]])
        edited = st.data_editor(table, hide_index=True, disabled=["hardware"], key="adv_prices")
        st.caption("Defaults are AWS on-demand list prices per GPU-hour where sourced "
                   "(GPU catalog on the Capacity page); empty = no public price: those arms "
                   "show as 'no price' until you enter one.")
        u1, u2, u3, u4 = st.columns(4)
        kwh = u1.number_input("electricity (USD/kWh)", 0.0, 2.0, 0.08, key="adv_kwh", persist_state="session",
                              help="EIA 2023 US average industrial price, about 0.08")
        runtime = u2.number_input("runtime (h)", 0.1, 10_000.0, 1.0, key="adv_runtime",
                                  persist_state="session")
        restart = u3.number_input("cost of a failed launch (h of the arm)", 0.0, 100.0, 0.5,
                                  key="adv_restart", persist_state="session")
        slope = u4.number_input("KV penalty slope above occupancy 0.85", 0.0, 20.0, 2.0,
                                key="adv_slope", persist_state="session")
    st.form_submit_button("Rank arms", type="primary")

price_map = {r.hardware: float(r.usd_per_gpu_h) for r in edited.itertuples()
             if pd.notna(r.usd_per_gpu_h)}
request = whatifs.advisor_request(
    model=name, params_b=float(params_b), active_params_b=float(active_b),
    concurrency=float(concurrency), in_len=float(in_len), out_len=float(out_len), task=task,
    ttft_slo_ms=float(ttft) or None, itl_slo_ms=float(itl) or None)
scored = whatifs.advise(request, price_map, float(value), float(kwh), float(runtime),
                      float(restart), float(slope))

out = Export("Placement", cache.dataset_names(("bench_runs", "jobs")))
out.param(model=name, params_b=float(params_b), active_params_b=float(active_b),
          concurrency=float(concurrency), in_len=float(in_len), out_len=float(out_len),
          task=task, ttft_slo_ms=float(ttft) or None, itl_slo_ms=float(itl) or None,
          value_usd_per_token=float(value), electricity_usd_per_kwh=float(kwh),
          runtime_h=float(runtime), failed_launch_cost_h=float(restart),
          kv_penalty_slope=float(slope), prices_usd_per_gpu_h=price_map)
out.keep(scored, "arms", "Every arm scored (ranked, abstained and infeasible)")
ranked = scored[scored["rank"].notna()]
m1, m2, m3, m4 = st.columns([1, 1, 1, 2])  # the best arm needs room: "H100-80GB x8 fp8"
m1.metric("ranked arms", len(ranked))
m2.metric("abstained (outside envelope)", int(scored["abstain"].sum()))
m3.metric("infeasible (memory)", int((~scored["feasible"]).sum()))
m4.metric("best arm", "none" if ranked.empty else
          f"{ranked.iloc[0]['hardware']} x{int(ranked.iloc[0]['tp'])} {ranked.iloc[0]['precision']}")
if ranked.empty:
    fb = scored[scored["fallback"]]
    reasons = scored["abstain_axis"][scored["abstain_axis"] != ""]
    # a request-level axis (size, lengths, concurrency, task) explains more than arm axes
    request_level = reasons[~reasons.str.match(r"^(hardware|precision) ")]
    axes = (request_level if len(request_level) else reasons).value_counts()
    fb_bits = whatifs.weight_bits(fb.iloc[0]["precision"]) if not fb.empty else None
    st.warning("The advisor abstains: " + (axes.index[0] if len(axes) else "no feasible, "
               "priced arm") + ". " + (
        "Rule-based fallback (the cheapest feasible priced arm, 16-bit weights preferred"
        + ("" if fb_bits is None or fb_bits >= 16 else
           f"; no 16-bit arm fits, this one has {fb_bits:g}-bit weights") + "): "
        f"**{fb.iloc[0]['hardware']} x{int(fb.iloc[0]['tp'])} {fb.iloc[0]['precision']}**"
        if not fb.empty else "No feasible priced arm for the fallback either."))
val = whatifs.advice_value(request, price_map, float(value), float(kwh), float(runtime),
                         float(restart), float(slope))
dec, be = val["decision"], val["break_even"]
be_text = (f"Break-even value per token: **{be['value_per_token_usd']:.3g} USD** "
           f"({be['value_per_token_usd'] * 1e6:,.2f} USD per 1M output tokens; "
           f"{be['arm']} reaches utility 0 first)" if be["value_per_token_usd"] is not None
           else f"No break-even value per token: {be['reason']}")
if dec["decision"] == "do_not_launch":
    st.warning(f"**Do not launch at this value per token** ({float(value):.3g} USD): the best "
               f"ranked arm, {dec['best_arm']}, has an expected utility of "
               f"{dec['best_utility_usd']:.2f} USD over {float(runtime):g} h and every ranked "
               "arm loses money, so the ranking only orders arms by how little they lose "
               f"(mostly the cheapest). {be_text}."
               + (f" Next step: at a value above {be['value_per_token_usd']:.3g} USD per token "
                  f"({be['value_per_token_usd'] * 1e6:,.2f} USD per 1M output tokens, the field "
                  f"above) {be['arm']} launches; or lower its cost (GPU price, runtime)."
                  if be["value_per_token_usd"] is not None else ""))
elif dec["decision"] == "launch":
    st.success(f"Launch: the best ranked arm, {dec['best_arm']}, has an expected utility of "
               f"{dec['best_utility_usd']:.2f} USD over {float(runtime):g} h. {be_text}.")
if val["support_warning"]:
    st.warning("Outside measured support: " + widgets.plain(val["support_warning"]) + ".")
slo_notes = [m["note"] for m in whatifs.advisor_slo_models(request).values()
             if m["note"] and (m["slo_ms"] or not m["fitted"])]
if slo_notes:  # issue 18 item 6: which SLOs have no model, or only an extrapolating one
    st.info("SLO models: " + "; ".join(widgets.plain(n) for n in slo_notes) + ".")
out.chart(cache.figure(charts.advisor_arms_chart, scored), key="arms_chart")
if (why := whatifs.interval_width_note(adv, ranked)) is not None:
    st.caption(widgets.plain(why))

tab_arms, tab_val, tab_bt, tab_voi, tab_cal, tab_pri, tab_ver, tab_specs = st.tabs(
    ["Arms", "Value per token", "Backtest", "Benchmarks worth running", "Calibration",
     "Launch-success priors", "Model versions", "GPU specs"])
with tab_arms:
    show = scored.copy()
    show["status"] = [f"ranked #{int(r)}" if r == r else ("infeasible: " + w) if not f else
                      ("abstain: " + a) if ab else "no price"
                      for r, f, w, ab, a in zip(show["rank"], show["feasible"],
                                                show["why_infeasible"], show["abstain"],
                                                show["abstain_axis"], strict=True)]
    cols = ["hardware", "tp", "precision", "status", "support", "utility",
            "throughput_tok_s_q10",
            "throughput_tok_s_q50", "throughput_tok_s_q90", "itl_ms_q50", "power_w_q50",
            "occupancy", "kv_note", "p_launch", "p_slo", "value_usd", "compute_usd", "queue_usd",
            "failure_usd"]
    out.table(show[[c for c in cols if c in show]], hide_index=True, key="arms_table")
    st.caption("Utility (USD over the runtime) = value per token x throughput x KV factor x "
               "(1 - P(SLO violated)) - compute (GPU-hours x price + power x electricity) - "
               "queue wait (median wait for that GPU count in the job history) - expected "
               "launch failure ((1 - P(launch)) x restart hours). Infeasible arms (weights + "
               "overhead do not fit, or the KV cache holds no one sequence: the server would "
               "not start) are never ranked; a KV cache smaller than the concurrency caps it "
               "(kv_note) and the arm is scored at a full cache. Arms outside the measured "
               "support (the advisor abstains on them) follow the ranked ones with their "
               "predicted utility, flagged low-confidence and never ranked.")
with tab_val:
    sens = val["sensitivity"]
    if sens.empty:
        st.info("No ranked arm: nothing to trace over value per token.")
    else:
        out.chart(cache.figure(charts.value_sensitivity_chart, sens, float(value),
                               be["value_per_token_usd"]), key="value_chart")
        out.table(sens, hide_index=True, key="value_table")
        st.caption("Utility is linear in the value per token v: U(v) = v x served tokens - "
                   "(compute + queue + failure cost), so each ranked arm breaks even at "
                   "cost / served tokens and the best arm at each v is exact (no re-fit). "
                   "Abstention, feasibility and prices do not depend on v.")
with tab_bt:
    with st.spinner("Backtesting ..."):
        bt = whatifs.advisor_backtest(float(value))
    if not bt["cells"]:
        st.info("No workload cell has two or more measured, priced arms: nothing to backtest.")
    else:
        out.chart(cache.figure(charts.backtest_chart, bt), key="backtest_chart")
        verdict = whatifs.backtest_verdict(bt, float(value))
        if verdict:
            st.markdown(f"**{widgets.plain(verdict['text'])}**")
            out.note(verdict["text"])
        out.table(pd.DataFrame([
            {"policy": k, "top-1": p["top1"], "top-1 95% CI low": p["top1_ci95"][0],
             "top-1 95% CI high": p["top1_ci95"][1], "regret": p["regret"],
             "regret 95% CI low": p["regret_ci95"][0], "regret 95% CI high": p["regret_ci95"][1]}
            for k, p in bt["policies"].items()]), hide_index=True, key="backtest_table")
        terms = bt["terms"]
        st.caption("Each cell's predictions come from a GroupKFold model that never saw the "
                   "cell; the true utility uses the measured throughput and power, and both "
                   "use the ranking's own terms: KV-saturation penalty above occupancy "
                   f"{terms['kv_knee']:g} ({terms['kv_penalised_arms']} of {bt['arms']} arms "
                   f"penalised, in {terms['kv_cells']} cells; occupancy is known only where "
                   "the source measures input lengths), launch prior, queue wait. "
                   f"{terms['infeasible_measured_arms']} measured arms are infeasible by the "
                   "memory model; the advisor never picks them (advisor_ignoring_memory_model "
                   "may). Intervals: percentile bootstrap over cells, "
                   f"{bt['bootstrap']['resamples']:,} resamples, seed {bt['bootstrap']['seed']}.")
with tab_voi:
    v1, v2 = st.columns(2)
    budget = v1.number_input("benchmark budget (node-hours)", 0.01, 1000.0, 0.2, key="voi_budget",
                             persist_state="session",
                             help="node-hours the ranked benchmarks may spend, best gain per "
                                  "node-hour first, at most 3 benchmarks, none whose expected "
                                  "gain is below its own cost (the paper's gate: 0.2 node-hours, "
                                  "depth 3)")
    setup = v2.number_input("launch overhead per benchmark (min)", 0.0, 240.0, 5.0,
                            key="voi_setup",
                            persist_state="session", help="an assumption: weights load and warm-up")
    gate = whatifs.voi_params(float(budget), float(setup))
    terms = (price_map, gate, float(value), float(kwh), float(runtime), float(restart),
             float(slope))
    with st.spinner("Ranking benchmarks by value of information ..."):
        voi_table, voi_info = whatifs.voi_ranking(*terms, model=name)
    if voi_info.get("model_note"):
        st.caption("Candidates: " + widgets.plain(voi_info["model_note"]) + ".")
    g1, g2, g3, g4 = st.columns(4)
    g1.metric("candidate benchmarks", voi_info["candidates"])
    g2.metric(f"expected gain > {voi_info['epsilon_usd']:g} USD", voi_info["above_epsilon"])
    g3.metric("within budget", voi_info["selected"])
    chosen = voi_table[voi_table["within_budget"]]
    g4.metric("expected gain within budget (USD)", f"{chosen['expected_gain_usd'].sum():.2f}")
    out.table(chosen if len(chosen) else voi_table.head(20), hide_index=True, key="voi_table")
    st.caption("A benchmark of an unmeasured cell x arm is an observation that moves the "
               "posterior mean of log throughput (normal belief from the calibrated q10 / q50 "
               "/ q90, conjugate update with the replicate noise tau^2 = "
               f"{voi_info['tau2']:.2g} measured on the stored grid). Expected gain = expected "
               "improvement of the cell's best expected utility after observing it (closed "
               "form, USD over the runtime); the paper's gate, which narrows the interval but "
               "leaves the median in place, is zero by construction. Gains are myopic and per "
               "cell, so they do not add up across benchmarks of the same cell. "
               + widgets.plain(whatifs.voi_node_hours_rule(gate)) + ".")
    with st.spinner("Backtesting the benchmark policies ..."):
        vbt = whatifs.voi_backtest(*terms)
    if not vbt["curves"]:
        st.info("No workload cell has two or more measured, priced arms: nothing to backtest.")
    else:
        out.chart(cache.figure(charts.voi_regret_chart, vbt), key="voi_chart")
        summ = pd.DataFrame(vbt["summary"]).T
        out.table(summ, key="voi_summary")
        best = vbt["best_policy"]
        st.caption(f"Sequential backtest on {vbt['cells']} stored cells ({vbt['arms']} measured "
                   f"arms): each run hides every arm of {vbt['cells_per_run']} random cells, "
                   "starts from the held-out-cell predictions and reveals one measured arm at "
                   "a time in each policy's order (local update, no refit). Regret = U best - "
                   "U recommended (USD over the runtime, measured utilities), averaged over "
                   "cells; it is 0 once every arm is revealed. VoI picks the best gain per "
                   f"node-hour while a gain exceeds {vbt['epsilon_usd']:g} USD, then stops "
                   "(the rest run cheapest first). On these data and terms "
                   f"**{best}** has the lowest mean regret over the node-hour axis "
                   "(area_mean_regret_usd; the table gives each policy's regret at fixed "
                   "budgets).")
with tab_cal:
    out.chart(cache.figure(charts.calibration_chart, adv.cost.metrics), key="calibration_chart")
    out.table(pd.DataFrame({t: {"rows": m["rows"], "cells": m["cells"],
                                   "MAPE %": m.get("mape_pct"), "R2 (log)": m.get("r2_log"),
                                   "crossing rate": m.get("crossing_rate"),
                                   "width ratio": m.get("width_ratio"),
                                   "coverage held-out cell": m.get("coverage", {}).get(
                                       "held_out_cell"),
                                   "coverage random fold": m.get("coverage", {}).get(
                                       "random_fold")}
                               for t, m in adv.cost.metrics.items()}).T, key="targets_table")
    st.caption("Held-out cell: the CQR offset from one half of the workload cells, coverage "
               "measured on the other half. Random fold: the offset a random KFold gives, "
               "applied to unseen cells (OmniPilot reports 80 % vs 64-69 %). Targets with "
               "fewer than 15 rows are not fitted.")
with tab_pri:
    pri = adv.ctx.priors
    if pri is None or pri.empty:
        st.info("No job history in the store: the failure term uses the paper's flat 0.95 "
                "launch-success default. Ingest a Slurm export (MIT SuperCloud or "
                "`sacct --parsable2`) on the Data page.")
    else:
        out.chart(cache.figure(charts.launch_priors_chart, pri), key="priors_chart")
        out.table(pri, hide_index=True, key="priors_table")
        st.caption("Success = COMPLETED; failure = FAILED, NODE_FAIL, BOOT_FAIL, OUT_OF_MEMORY; "
                   "cancelled and timed-out jobs are not launch outcomes. Observational and "
                   "confounded: used only in the failure term.")
        out.table(adv.ctx.waits, hide_index=True, key="waits_table")
with tab_ver:
    if st.button("Record this fit (promotion gate)", key="record_version"):
        res = whatifs.record_model_version()
        (st.success if res["promoted"] else st.warning)(
            f"version {res['version']}: {'promoted' if res['promoted'] else 'not promoted'} "
            f"- {res['reason']}")
    versions = whatifs.model_versions()
    if versions.empty:
        st.caption("No model version recorded yet.")
    else:
        out.table(versions, hide_index=True, key="versions_table")
    st.caption("A candidate is promoted only if its decision-target (throughput) MAPE does not "
               "regress by more than 0.5 pp and it was trained on at least as many rows.")
with tab_specs:
    out.table(whatifs.hardware_specs(), hide_index=True, key="specs_table")
out.render()
