"""Serving: energy-aware shared-GPU serving what-ifs (Festina)."""

import streamlit as st
from analytics.ui import cache, charts, scenario, whatifs, widgets
from analytics.ui.export import Export
from analytics.ui.progress import Progress, on_demand

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Serving")
st.caption("Energy-aware serving of many co-hosted LLMs on shared GPUs (Festina, arXiv "
           "2606.30391): max-clock and static-DVFS baselines vs. Festina's lookup placement, "
           "phase-aware clock (Eq. 9), SM shares and EWR consolidation - a simulation on a "
           "stored request trace with benchmark-derived profiles.")

inputs = whatifs.serving_inputs()
if not inputs["traces"]:
    st.info("No request trace with prompt and completion token counts in the store. Add one on "
            "the Data page (pull or upload e.g. `AzureLLMInferenceTrace_conv.csv`), or run "
            "`headroom pull azure2023_conv` then `headroom ingest AzureLLMInferenceTrace_conv.csv`"
            " (Mooncake: `headroom pull mooncake_conversation`). The synthetic demo has token "
            "counts too, but this page also needs measured benchmark profiles, which are never "
            "synthesised.")
    widgets.stop()
if not inputs["gpus"]:
    st.info("No benchmark profiles for a GPU kind with a cited clock range. "
            + (inputs["why"] + " " if inputs["why"] else "")
            + "Get ML.ENERGY decode rows and an Argonne TTFT table: `headroom pull "
              "mlenergy_v3_lm_arena_chat` and `headroom pull argonne_ttft_itl`, then `headroom "
              "ingest` the two files (or pull / upload them on the Data page). Staged copies "
              "work too: `ml_energy/leaderboard_v3/all_task_configurations_flat.csv` (H100), "
              "`ml_energy/leaderboard_v2/llm_text_generation_runs.csv` (A100), "
              "`Fig_21__all_results_TTFT.csv`.")
    widgets.stop()

# the simulation reruns only on "Run the simulation": a slider moved by keyboard does not
# start one run per step
with st.form("serving_form"):
    c1, c2, c3, c4 = st.columns(4)
    trace = c1.selectbox("Trace", inputs["traces"], key="serving_trace", persist_state="session")
    gpu = c2.selectbox("GPU kind", inputs["gpus"], key="serving_gpu", persist_state="session")
    n_gpus = c3.number_input("GPUs in the pool", 1, 64, 8, key="serving_gpus", persist_state="session",
                             help=whatifs.serving_help("n_gpus"))
    n_models = c4.number_input("co-hosted models", 1, 64, 16, key="serving_models", persist_state="session",
                               help=whatifs.serving_help("n_models"))
    c5, c6, c7, c8 = st.columns(4)
    ttft = c5.number_input("TTFT SLO (ms)", 10, 60000, 1000, step=100, key="serving_ttft",
                           persist_state="session",
                           help=whatifs.serving_help("ttft_slo_ms"))
    tbt = c6.number_input("TBT SLO (ms)", 1, 5000, 100, step=10, key="serving_tbt", persist_state="session",
                          help=whatifs.serving_help("tbt_slo_ms"))
    margin = c7.slider("safety margin", 0.0, 0.5, 0.05, 0.01, key="safety_margin", persist_state="session",
                       help=whatifs.serving_help("safety_margin"))
    window_min = c8.number_input("simulate the first ... minutes (0 = all)", 0, 24 * 60, 10,
                                 key="serving_window", persist_state="session",
                                 help="a shorter window keeps the page fast; the CLI runs all")
    with st.expander("Model parameters"):
        d1, d2, d3, d4, d5 = st.columns(5)
        calibrate = d1.checkbox("calibrate gamma", value=True, key="serving_calibrate",
                                persist_state="session",
                                help="solve the SM-power exponent so the largest predicted decode "
                                     "saving from clock locking equals the 32 % measured on Hopper "
                                     "(Ma et al., arXiv 2605.11999)")
        gamma_in = d2.number_input("SM power exponent gamma (used when not calibrated)", 0.5,
                                   6.0, 3.0, 0.1, key="serving_gamma", persist_state="session",
                                   help=whatifs.serving_help("dvfs_gamma"))
        static_scale = d3.number_input("static power x", 0.25, 3.0, 1.0, 0.25,
                                       key="serving_static", persist_state="session",
                                       help=whatifs.serving_help("static_scale"))
        zipf = d4.number_input("Zipf exponent of model popularity", 0.0, 3.0, 1.0, 0.1,
                               key="serving_zipf",
                               persist_state="session", help=whatifs.serving_help("zipf_s"))
        seed = d5.number_input("seed", 0, 10_000, 0, key="serving_seed", persist_state="session")
        e1, e2, e3, e4 = st.columns(4)
        predictor = e1.selectbox("output-length predictor", ["oracle", "quantile"],
                                 key="serving_predictor", persist_state="session",
                                 help=whatifs.serving_help("length_predictor"))
        length_error = e2.select_slider("oracle predictor error (+-)", [0.0, 0.025, 0.05, 0.10],
                                        value=0.05, format_func=lambda v: f"{100 * v:g} %",
                                        key="serving_length_error", persist_state="session",
                                        help=whatifs.serving_help("length_error"))
        length_q = e3.number_input("quantile predictor: quantile", 0.05, 0.95, 0.5, 0.05,
                                   key="serving_length_q", persist_state="session",
                                   help=whatifs.serving_help("length_quantile"))
        fit_min = e4.number_input("quantile predictor: fit on the first ... minutes", 1,
                                  24 * 60, 10, key="serving_fit_min", persist_state="session",
                                  help=whatifs.serving_help("length_fit_s") + "; the simulated "
                                  "window then starts after them")
        chunk = st.number_input("chunked prefill: tokens per iteration (0 = off, a prefill "
                                "pauses decode)", 0, 65_536, 0, 512, key="serving_chunk",
                                persist_state="session",
                                help=whatifs.serving_help("chunk_tokens"))
        upload = st.file_uploader("Measured profile CSV (model, gpu, phase, sm_share, clock_mhz, "
                                  "latency_ms, power_w) - replaces the DVFS model",
                                  type=["csv"], key="serving_profile")
    st.form_submit_button("Run the simulation", type="primary", key="serving_run")
target = st.number_input(
    "SLO attainment target (share of requests within both SLOs' TTFT and TBT)", 0.5, 1.0, 0.9,
    0.01, key="serving_target", persist_state="session",
    help="Your service's target; a saving is reported with the attainment it costs, and a "
         "warning when a policy falls below this target or more than 2 pp below max-clock "
         "(the Festina paper's parity margin).")
gamma = None if calibrate else float(gamma_in)
measured = upload.getvalue() if upload is not None else None
bench_names = cache.dataset_names(("bench_runs",))
bench_synth = widgets.warn_synthetic(widgets.synthetic_among(bench_names),
                                     "benchmark runs among the serving profiles' sources")
synthetic = inputs["synthetic"].get(trace, False) or bench_synth

params = whatifs.serving_params(n_models=int(n_models), n_gpus=int(n_gpus), gpu=gpu,
                              ttft_slo_ms=float(ttft), tbt_slo_ms=float(tbt),
                              safety_margin=float(margin), zipf_s=float(zipf),
                              dvfs_gamma=gamma, static_scale=float(static_scale), seed=int(seed),
                              chunk_tokens=int(chunk), length_predictor=predictor,
                              length_error=float(length_error), length_quantile=float(length_q),
                              length_fit_s=float(fit_min) * 60,
                              window_s=float(window_min) * 60 if window_min else None)
try:  # first, the trace the simulation replays (no simulation yet)
    st.plotly_chart(charts.demand_chart(cache.demand_grid(trace, 60), trace, "1min", synthetic,
                                        height=360), key="serving_trace_chart")
except ValueError:
    pass  # the simulation below says what is wrong with the trace
if Progress.cancelled("serving_run"):
    st.info("Simulation cancelled; the policies finished before the cancel are kept in the "
            "store, and running it again computes only the rest.")
    widgets.stop()
bar = Progress("Simulating max-clock, static DVFS, Festina and the ablation", "serving_run")
try:
    run = whatifs.serving_run(trace, params, measured, progress=bar)
except ValueError as exc:
    bar.close()
    st.error(f"No simulation: {widgets.plain(exc)}")
    widgets.stop()
bar.close()
pol_run = run["policies_run"]
st.caption(f"{pol_run['tasks']} policy runs: {widgets.sweep_source(pol_run)}.")

out = Export("Serving", [trace, *bench_names])
out.param(**{k: v for k, v in params.__dict__.items() if not k.startswith("_")})
out.keep(run["table"], "policies", "Energy and SLO attainment per policy")
t = run["table"].set_index("policy")
fest, base = t.loc["festina"], t.loc["max_clock"]
ttft_pp = 100 * (fest["ttft_attainment"] - base["ttft_attainment"])
tbt_pp = 100 * (fest["tbt_attainment"] - base["tbt_attainment"])
misses = [f"{name} attainment {fest[col]:.2%} (max-clock {base[col]:.2%})"
          for name, col, pp in (("TTFT", "ttft_attainment", ttft_pp),
                                ("TBT", "tbt_attainment", tbt_pp))
          if fest[col] < target or pp < -2]
m1, m2, m3, m4 = st.columns(4)
m1.metric("Festina energy", f"{fest['energy_kwh']:.4f} kWh",
          f"{fest['energy_kwh'] / base['energy_kwh'] - 1:+.1%} vs max-clock",
          delta_color="off" if misses else "inverse",
          help=f"At {ttft_pp:+.1f} pp TTFT and {tbt_pp:+.1f} pp TBT attainment against "
               "max-clock (the attainment deltas beside it).")
if misses:
    st.warning(f"This saving costs SLO attainment: {'; '.join(misses)}, below the "
               f"{target:.0%} target or more than 2 pp below max-clock. Raise the safety "
               "margin or add GPUs before reading the energy figure as a saving.")
m2.metric("max-clock energy", f"{base['energy_kwh']:.4f} kWh")
m3.metric("Festina TTFT attainment", f"{fest['ttft_attainment']:.2%}",
          f"{ttft_pp:+.2f} pp vs max-clock")
m4.metric("Festina TBT attainment", f"{fest['tbt_attainment']:.2%}",
          f"{tbt_pp:+.2f} pp vs max-clock")

out.chart(cache.figure(charts.serving_energy_chart,
    run["table"], ["max_clock", "static_dvfs", "festina"], "Energy normalised to Festina, and "
    "SLO attainment", synthetic), key="serving_energy")
out.chart(cache.figure(charts.serving_energy_chart,
    run["table"], ["stage1", "stage2", "stage3", "stage4", "festina"],
    "Ablation: 1 SLO-aware dispatch -> 2 frequency-aware dispatch -> 3 fine-grained runtime "
    "-> 4 SLO-aware placement -> 5 consolidation (Festina)", synthetic), key="serving_ablation")
if run["json"].get("ablation_note"):
    st.caption(run["json"]["ablation_note"])
out.table(run["table"][["policy", "energy_kwh", "energy_vs_festina", "saving_vs_max_clock",
                           "ttft_attainment", "tbt_attainment", "mean_gpus_on",
                           "mean_clock_mhz", "prefill_kwh", "decode_kwh", "static_busy_kwh",
                           "idle_kwh", "prefill_clock_mhz", "decode_clock_mhz",
                           "clock_changes", "need_bound_share", "served", "requests"]],
             hide_index=True, key="serving_table", column_config={
                 "energy_kwh": st.column_config.NumberColumn("energy (kWh)", format="%.4f"),
                 "energy_vs_festina": st.column_config.NumberColumn("energy vs Festina",
                                                                    format="%.3f x"),
                 "saving_vs_max_clock": st.column_config.NumberColumn("saving vs max-clock",
                                                                      format="percent"),
                 "ttft_attainment": st.column_config.NumberColumn("TTFT attainment",
                                                                  format="percent"),
                 "tbt_attainment": st.column_config.NumberColumn("TBT attainment",
                                                                 format="percent"),
                 "mean_gpus_on": st.column_config.NumberColumn("mean GPUs on", format="%.2f"),
                 "mean_clock_mhz": st.column_config.NumberColumn("mean clock (MHz)",
                                                                 format="%.0f"),
                 "prefill_kwh": st.column_config.NumberColumn("prefill (kWh)", format="%.4f"),
                 "decode_kwh": st.column_config.NumberColumn("decode (kWh)", format="%.4f"),
                 "static_busy_kwh": st.column_config.NumberColumn("static, busy (kWh)",
                                                                  format="%.4f"),
                 "idle_kwh": st.column_config.NumberColumn("idle (kWh)", format="%.4f"),
                 "prefill_clock_mhz": st.column_config.NumberColumn(
                     "prefill clock (MHz)", format="%.0f",
                     help="token-weighted SM clock of prefill tokens"),
                 "decode_clock_mhz": st.column_config.NumberColumn(
                     "decode clock (MHz)", format="%.0f",
                     help="token-weighted SM clock of decode tokens"),
                 "clock_changes": st.column_config.NumberColumn(
                     "clock changes", help="the simulator charges no energy for a change"),
                 "need_bound_share": st.column_config.NumberColumn(
                     "clock set by SLO need", format="percent",
                     help="share of a dynamic clock's settings in which an SLO need, not the "
                          "energy-optimal clocks or Eq. 9, set the clock")})
out.chart(cache.figure(charts.serving_timeseries_chart, run["timeseries"],
                                                ["max_clock", "static_dvfs", "festina"],
                                                synthetic), key="serving_ts")
metric = st.radio("latency CDF", ["TTFT", "TBT"], horizontal=True, key="serving_cdf", persist_state="session")
out.chart(cache.figure(charts.serving_cdf_chart, run["cdf"] if metric == "TTFT" else run["cdf_tbt"],
                                         float(ttft if metric == "TTFT" else tbt), metric,
                                         synthetic), key="serving_cdf_chart")

st.subheader("Sensitivity: SM power exponent and static power")
st.caption("No staged file measures GPU power against the SM clock, so the saving rests on the "
           "exponent gamma (calibrated by default) and on the static floor. The sweep reruns "
           "max-clock and Festina with the settings above for gamma = calibrated, 1.5, 2, 3 "
           "and the static floor x 0.5, 1, 1.5.")
sens = on_demand("serving_sens", "Run the sensitivity sweep (12 x 2 simulations)",
                 "Sensitivity sweep", (trace, params, measured),
                 "Sensitivity sweep cancelled; the settings finished before the cancel are kept "
                 "in the store, and running it again computes only the rest.",
                 lambda bar: whatifs.serving_sensitivity(trace, params, measured, progress=bar))
if sens is not None:
    out.chart(cache.figure(charts.serving_sensitivity_chart, sens, synthetic), key="serving_sens")
    out.table(sens, hide_index=True, key="serving_sens_table")
    sens_run = sens.attrs["sweep_run"]
    st.caption(f"{sens_run['tasks']} settings: {widgets.sweep_source(sens_run)}.")

st.subheader("Output-length prediction")
st.caption("The schedulers read each request's predicted output length (Festina Sec. 3.2.2); "
           "only the simulated execution uses the true one. The noisy oracle multiplies the true "
           "length by 1 + e, e uniform within +- the error level (the paper's predictor errs by "
           "2.5-10 %, Fig. 7; default 5 %); the quantile predictor gives every request of a "
           "model that model's quantile of the lengths in the trace's first minutes, which are "
           "then not replayed. The sweep reruns max-clock and Festina for the oracle at 0, 2.5, "
           "5 and 10 % and for the quantile predictor, all on the requests after the quantile "
           "predictor's fit window (the same requests in every row).")
sweep = on_demand("serving_pred", "Run the prediction-error sweep (5 x 2 simulations)",
                  "Prediction-error sweep", (trace, params, measured),
                  "Prediction-error sweep cancelled; rows finished before the cancel are not kept.",
                  lambda bar: whatifs.serving_prediction_sweep(trace, params, measured,
                                                               progress=bar))
if sweep is not None:
    out.chart(cache.figure(charts.serving_prediction_chart, sweep, synthetic),
              key="serving_pred")
    out.table(sweep, hide_index=True, key="serving_pred_table", column_config={
        "length_error": st.column_config.NumberColumn("oracle error (+-)", format="percent"),
        "mean_abs_error_pct": st.column_config.NumberColumn("mean |error| (%)",
                                                            format="%.1f"),
        "energy_saving_pct": st.column_config.NumberColumn("energy saving (%)",
                                                           format="%.2f"),
        "slo_attainment_pct": st.column_config.NumberColumn("SLO attainment (%)",
                                                            format="%.2f")})

st.subheader("Profile viewer")
batch = st.select_slider("decode batch", [1, 8, 32, 128], value=32, key="serving_batch",
                         persist_state="session")
out.chart(cache.figure(charts.serving_profile_chart, whatifs.serving_curves(gpu, gamma, int(batch),
                                                                  measured,
                                                                  float(static_scale))),
                key="serving_profiles")
with st.expander("Where the numbers come from"):
    for field, cite in whatifs.serving_dvfs_sources(gpu):
        st.markdown(f"- **{field}**: {cite}")
    st.markdown("- **DVFS model**: prefill time ~ 1/(f x SM share); decode iteration = "
                "T_nom(b) (m + (1-m)/(f x share)) with m = weights / memory bandwidth / T_nom(b) "
                "(roofline); power = static floor + share x (P_nom - floor) x "
                "(m + (1-m) (f/f_max)^gamma): the memory-bound share of decode power (HBM) "
                "does not follow the SM clock (m = 0 for prefill).")
    st.markdown("- **gamma**: calibrated so the largest decode-energy saving the model predicts "
                "for the dense profiles equals the 32 % that SM clock locking recovers on "
                "Hopper (Ma, Afzal, Eitzinger & Wellein, arXiv 2605.11999, H200). "
                "Mixture-of-experts profiles are left out of the calibration (their roofline "
                "floor counts every expert's weights).")
    st.markdown("- **Not sourced (parameters)**: the Zipf exponent, the KV budget (50 % of "
                "weights), keep-alive (60 s), the EWR threshold (0.5), the SLO values. Prefill "
                "power is the highest measured power of the model on that GPU (no staged source "
                "measures prefill power alone).")
    st.markdown("- **Global scheduler**: requests and new replicas go to the SLO-safe GPU with "
                "the lowest lookup energy in an offline table of every profile on a (batch, "
                "SM share, clock) grid; candidates within 2 % energy go to the most free "
                "memory, then the most free SMs; with no safe candidate a GPU is powered on "
                "(scale-out).")
    for model, rows in run["profiles"]:
        st.markdown(f"- {widgets.plain(model)}: {rows}")
for n in run["notes"]:
    st.caption(n)
out.render()
