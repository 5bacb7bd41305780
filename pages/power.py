"""Power: how grid-facing load changes when batch jobs and LLM inference share one GPU pool."""

import pandas as pd
import streamlit as st
from analytics.config import DemandTarget
from analytics.ui import cache, charts, scenario, whatifs, widgets
from analytics.ui.export import Export
from analytics.ui.progress import Progress

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Power")
st.caption("Hybrid batch + inference co-simulation (after Mural, Yu & Xie, \"Workload composition "
           "smooths aggregate power demand while sustaining short-horizon ramps in AI data "
           "centers\"): batch jobs from a job trace queue for the GPUs inference leaves free; "
           "inference follows a request trace and has priority. GPU count and target utilisation "
           "stay fixed while the inference share of the work varies.")

job_names, demand_names = whatifs.power_datasets()
if not job_names:
    st.info("No job trace in the store, so there is nothing to simulate batch work from. "
            + whatifs.power_no_jobs_hint().replace("no job trace in the store: ", "To add one: ")
            + ". The staged MIT SuperCloud export has 2,368 GPU jobs; after ingesting it, "
              "come back here.")
    widgets.stop()

default_inf = whatifs.power_default_inference()
inf_options = [*demand_names, "synthetic"]
for key, options in (("power_jobs", job_names), ("power_inference", inf_options)):
    if st.session_state.get(key) not in (None, *options):  # a link naming another store's data
        st.warning(f"Dataset {widgets.plain(st.session_state.pop(key))} is not in this store.")
c1, c2 = st.columns(2)
jobs_name = c1.selectbox("Job trace (batch arrivals)", job_names, key="power_jobs", persist_state="session")
inference_name = c2.selectbox(
    "Inference demand", inf_options, key="power_inference", persist_state="session",
    index=inf_options.index(default_inf) if default_inf in inf_options else len(inf_options) - 1,
    help="a request trace or per-minute series; 'synthetic' is a labelled daily envelope. "
         "Dense token traces come first; a trace with half or more of its minutes empty (the "
         "Alibaba LoRA trace: 70 %) is too sparse to represent serving load and comes last")
arrivals = c2.radio(
    "Inference arrivals", ["replay", "request groups"], horizontal=True, key="power_inf_model",
    persist_state="session",
    help="replay: the chosen trace, repeated. request groups: the paper's model (Methods, "
         "'Inference request arrivals'): code and conversation Q1-Q4 groups with "
         "negative-binomial minute counts, fitted on the Azure LLM 2023 traces in the store and "
         "split over the 7 templates with the overdispersion rescaled")
inference_model = "groups" if arrivals == "request groups" else "replay"
if inference_model == "groups":
    c2.caption("Request groups are fitted on the store's Azure LLM traces; the selection above "
               "is not used.")
else:
    unit = ("tokens" if inference_name == "synthetic" else
            DemandTarget(cache.targets(inference_name)[0]).label)
    c2.caption(f"Demand per minute in {unit} (what this trace carries).")

c1, c2, c3, c4, c5 = st.columns([3, 2, 2, 2, 2])  # room for every label (issue 31 item 8)
share = c1.slider("inference share", 0.0, 1.0, 0.5, 0.05, key="power_share", persist_state="session",
                  help=whatifs.power_help("inference_share"))
utilization = c2.select_slider("target utilisation", [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
                               value=0.8, key="power_util", persist_state="session",
                               help=whatifs.power_help("utilization"))
ckpt_label = c3.selectbox("checkpoint length", ["15 min", "60 min", "240 min", "none"], index=1,
                          key="power_ckpt",
                          persist_state="session", help=whatifs.power_help("checkpoint_min"))
scheduler = c4.radio("scheduler", ["fcfs", "swf"], horizontal=True, key="power_sched",
                     persist_state="session",
                     help=whatifs.power_help("scheduler"))
capped = c5.toggle("cap inference", key="power_capped", persist_state="session",
                   help=whatifs.power_help("capped"))
with st.expander("More settings"):
    a1, a2, a3, a4 = st.columns(4)
    gpus = a1.number_input("GPUs in the pool", 16, 2048, 256, 16, key="power_gpus", persist_state="session",
                           help=whatifs.power_help("n_gpus"))
    days = a2.number_input("measured days", 1, 28, 7, key="power_days", persist_state="session",
                           help=whatifs.power_help("days"))
    speed = a3.radio("serving speed (ML.ENERGY max batch 32 / 64 / 128)", ["F", "M", "S"],
                     index=1, horizontal=True, key="power_speed",
                     persist_state="session", help=whatifs.power_help("speed"))
    seed = a4.number_input("seed", 0, 10_000, 0, key="power_seed", persist_state="session")
    st.number_input("sweep replications (seeds per point; more: tighter 95 % bands, longer)", 2,
                    30, 3, key="power_reps", persist_state="session")

ckpt = None if ckpt_label == "none" else float(ckpt_label.split()[0])
scenario = whatifs.power_scenario_of(
    inference_share=float(share), utilization=float(utilization), n_gpus=int(gpus),
    days=float(days), scheduler=scheduler, checkpoint_min=ckpt, capped=bool(capped),
    speed=speed)
# first, the batch demand the simulation draws from (no simulation yet)
jobs_synth = widgets.warn_synthetic(widgets.synthetic_among([jobs_name]), "batch jobs")
st.plotly_chart(charts.label_synthetic(
    charts.jobs_daily_chart(whatifs.jobs_per_day(jobs_name), jobs_name), jobs_synth),
    key="jobs_daily_chart")
try:
    run = whatifs.power_run(jobs_name, inference_name, scenario, int(seed), inference_model)
except ValueError as exc:
    st.error(f"No simulation: {widgets.plain(exc)}")
    widgets.stop()
synthetic = run["synthetic"] or jobs_synth
out = Export("Power", [jobs_name, inference_name])
out.param(jobs=jobs_name, inference=inference_name, inference_share=float(share),
          utilization=float(utilization), n_gpus=int(gpus), days=float(days),
          scheduler=scheduler, checkpoint=ckpt_label, capped=bool(capped), seed=int(seed),
          inference_arrivals=inference_model)
left_out = run["inputs"]["left_out_jobs"]
if left_out:
    st.warning(f"{run['inputs']['left_out_jobs_total']} GPU job(s) of "
               f"{widgets.plain(jobs_name)} left out of the simulation "
               f"({run['inputs']['jobs_used']} used); each one and why:")
    out.table(pd.DataFrame(left_out), hide_index=True, key="power_left_out")
for warning in run["warnings"]:
    st.warning(widgets.plain(warning))
if run["synthetic"]:
    st.warning("SYNTHETIC inference demand: a generated daily envelope, not measured traffic. "
               "Ingest a request trace (e.g. BurstGPT per-minute tokens) for real inference.")

m = run["metrics"]
cols = st.columns(6)
cols[0].metric("CV of total power", f"{m['cv']:.3f}", help="sd / mean of per-minute total power")
for col, h in zip(cols[1:4], ("1min", "5min", "15min"), strict=True):
    col.metric(f"p50 ramp {h}", f"{m['ramp_p50'][h]:.2%}",
               help=f"median |P(t+{h}) - P(t)| / mean power")
cols[4].metric("realised utilisation", f"{m['realized_utilization']:.0%}",
               help="mean busy GPUs / pool (target: served inference + offered batch)")
cols[5].metric("inference shortfall", f"{m['inference_shortfall']:.1%}",
               help="inference GPU-minutes demanded but not served (clipped by the pool or the "
                    "cap)")
cols = st.columns(6)
share_txt = (f"{m['realized_inference_share']:.0%}"
             if m["realized_inference_share"] == m["realized_inference_share"] else "-")
cols[0].metric("realised inference share", share_txt,
               help="served inference GPU-minutes / all busy GPU-minutes")
cols[1].metric("clipped inference GPU-h", f"{m['inference_clipped_gpu_min'] / 60:,.0f}",
               help="inference GPU-hours demanded but not served in the window")
cols[2].metric("batch shortfall", f"{m['batch_shortfall']:.0%}",
               help="1 - served batch GPUs / offered batch GPUs: the batch queue grew instead of "
                    "filling the pool (a segment starts only where it fits beside the inference "
                    "plan for its whole length)")
if not m["inference_target_reached"]:
    st.warning("The inference target (share x utilisation x pool, served) is above what this "
               "trace can fill: its empty minutes stay empty however far it is scaled, so the "
               "served inference GPU-time falls short of the target.")

title = (f"share {share:g}, U={utilization:g}, {gpus} GPUs, {scheduler}, checkpoint "
         f"{ckpt_label}, {'capped' if capped else 'uncapped'}")
out.chart(cache.figure(charts.power_timeseries_chart, run["frame"], title, synthetic), key="power_ts")
out.keep(run["frame"], "power_per_minute", "Power per minute (W)")

if "request_model" in run["inputs"]:
    rm = run["inputs"]["request_model"]
    st.subheader("Request-group arrival model")
    out.table(pd.DataFrame(rm["groups"]), hide_index=True, key="power_request_groups")
    v = rm["validation"]
    vc = st.columns(4)
    vc[0].metric("requests/min: replay vs model",
                 f"{v['mean_per_min']['replay']:.0f} vs {v['mean_per_min']['generated']:.0f}")
    vc[1].metric("sd/min: replay vs model", f"{v['var_per_min']['replay'] ** 0.5:.0f} vs "
                 f"{v['var_per_min']['generated'] ** 0.5:.0f}")
    rc = v["revealed_capacity_per_min"]
    vc[2].metric("revealed capacity (req/min): replay vs model",
                 f"{rc['replay']:.0f} vs {rc['generated']:.0f}",
                 help="running max of the daily 99th percentile (paper, Methods)")
    vc[3].metric("PSD mean |log10 ratio|", f"{v['psd_log10_mad']:.2f}",
                 help="Welch PSD of generated vs replayed per-minute requests; 0 = identical")
    out.chart(cache.figure(charts.power_psd_chart, v), key="power_psd")
    st.caption("Groups: code pooled, conversation Q1-Q4 at the context-token quartiles; "
               "per-minute counts NB2 (Var = mu + alpha mu^2, moment fit), each group split over "
               "7 templates with alpha x 7 so the sum keeps the group's variance. "
               + " ".join(rm["notes"]))

st.subheader("Variability and ramps vs inference share")
utils = tuple(sorted({0.5, 0.8, float(utilization)}))
if Progress.cancelled("power_sweep"):
    st.session_state["power_sweep_off"] = True
# the sweep (33 runs x seeds) runs when asked, never on a first visit (issue 31 item 6: it took
# 258 s on a loaded host before the page was usable); once asked it follows the inputs
if st.session_state.get("power_sweep_off", "not asked") is not False:
    st.info("Sweep cancelled." if st.session_state.get("power_sweep_off") is True else
            "The inference-share sweep (11 shares at each utilisation, several seeds each: "
            "CV and ramps with 95 % bands, and whether CV is U-shaped in the share) runs on "
            "request; the single scenario above is done.")
    if not st.button("Run the sweep", key="power_sweep_run"):
        out.render()
        widgets.stop()
    st.session_state["power_sweep_off"] = False
reps = int(st.session_state.get("power_reps", 3))
bar = Progress(f"Sweeping 11 inference shares at U = {', '.join(f'{u:g}' for u in utils)} "
               f"({reps} seeds each)", "power_sweep")
try:
    table, shape, sweep_run = whatifs.power_sweep(jobs_name, inference_name, scenario, utils,
                                                  reps, int(seed), progress=bar,
                                                  inference_model=inference_model)
except ValueError as exc:  # e.g. the operator's Dask scheduler does not answer
    bar.close()
    st.error(f"No sweep: {widgets.plain(exc)}")
    out.render()
    widgets.stop()
bar.close()
out.chart(cache.figure(charts.power_sweep_chart, table, float(share), float(utilization), synthetic),
          key="power_sweep")
VERDICT = {True: "{yes}", False: "{no}", "not distinguishable": "not distinguishable within the "
           "95 % bands (means: {means})"}
lines = []
for u, s in shape.items():
    cv = VERDICT[s["u_shape_cv"]].format(
        yes="U-shaped", no="not U-shaped",
        means="U-shaped" if s["u_shape_cv_of_means"] else "not U-shaped")
    hump = VERDICT[s["hump_15min"]].format(
        yes="has a hump", no="has no interior hump",
        means="a hump" if s["hump_15min_of_means"] else "no interior hump")
    lines.append(f"U={u}: CV is {cv} (minimum of the means at share {s['cv_min_share']:g}); the "
                 f"15-min ramp {'is ' if s['hump_15min'] == 'not distinguishable' else ''}{hump} "
                 f"(maximum at share {s['ramp15_max_share']:g}).")
where = widgets.sweep_source(sweep_run)
st.caption("On these inputs: " + " ".join(lines) + f" Each point is the mean of {reps} seeds "
           "with the same random numbers at every share, with its 95 % t-interval (band); a "
           "verdict that flips within the bands is not distinguishable. "
           f"{sweep_run['tasks']} runs: {where}.")
held = []
for u, g in table.groupby("utilization"):
    short = g[g["inference_target_reached"] < 1]["inference_share"]
    held.append(f"U={u:g}: realised utilisation {g['realized_utilization'].min():.2f}-"
                f"{g['realized_utilization'].max():.2f}, clipped inference up to "
                f"{g['inference_clipped_gpu_min'].max() / 60:,.0f} GPU-h"
                + (f"; served inference target not reachable at share "
                   f"{', '.join(f'{x:g}' for x in short)}" if len(short) else "") + ".")
st.caption(f"Utilisation held on the {scenario.hold} inference GPU-time; x is the realised "
           "inference share (served inference / busy GPU-minutes). " + " ".join(held)
           + " Batch below its target means its queue grew: a checkpoint segment starts only "
             "where it fits beside the inference plan for its whole length.")
with st.expander("Sweep table"):
    out.table(table, hide_index=True, key="power_sweep_table")

st.subheader("Daily profile")
out.chart(cache.figure(charts.power_daily_chart, run["daily"], synthetic), key="power_daily")

with st.expander("Inputs and assumptions"):
    info = run["inputs"]
    st.markdown(f"**Batch jobs**: {widgets.plain(info['jobs'])} (fitted days {info['fit_window'][0]} to "
                f"{info['fit_window'][1]}, clock UTC{info['clock_offset_h']:+g} h); "
                f"**inference**: {widgets.plain(info['inference'])}.")
    out.table(pd.DataFrame(info["groups"]), hide_index=True, key="power_groups")
    st.caption("Resource groups: Ward clustering on (log GPUs, log GPU-hours); arrivals per "
               "group: negative-binomial daily counts and a logistic-normal hourly profile "
               "calibrated to the pooled hourly histogram and the sd of the daily centre of "
               "mass.")
    out.table(pd.DataFrame(info["templates"]), hide_index=True, key="power_templates")
    st.caption(f"LLM templates: {info['templates_source']}. Demand is split equally; each "
               "template runs whole instances; power = tokens/s x J/token.")
    st.caption(f"Batch power per GPU: {info['batch_power']}, x {info['hw_factor']:.2f} "
               f"({info['hw_factor_source']}).")
    for note in info["notes"]:
        st.caption(note)
out.render()
