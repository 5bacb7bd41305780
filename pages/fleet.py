"""Fleet plan: how many replicas of which measured arm serve this trace under a latency SLO at a
stated risk, and the files that launch them (vllm serve, Kubernetes + KEDA, SkyServe, Slurm)."""

import pandas as pd
import streamlit as st
from analytics.config import BIN_CHOICES_S
from analytics.ui import cache, charts, scenario, widgets
from analytics.ui import fleet as fleet_data
from analytics.ui.export import Export

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Fleet plan")
st.caption("Replicas per bin = the certified demand (the overbooking factor x the envelope's "
           "rolling upper bound, Learn-then-Test) over what one replica serves at the SLO (the "
           "knee of its measured concurrency sweep). Demand is counted in output tokens, the "
           "unit the benchmarks measure throughput in.")

name, info = widgets.chosen_dataset()
synthetic = bool(info["synthetic"])
models = fleet_data.slo_models()
if models.empty:
    st.info("No benchmark in this store carries latency percentiles (TTFT / ITL p90 or p99). "
            "Add the ML.ENERGY v3 leaderboard or a `vllm bench serve` result on the Data page.")
    widgets.stop()
bin_label = widgets.intraday_bin(info, "fleet_bin", "fleet plans")

rows = {f"{r['model']} ({r['task'] or 'any task'})": r for r in models.to_dict("records")}
pick = st.selectbox("model (benchmark task)", list(rows), key="fleet_model",
                    persist_state="session",
                    format_func=lambda k: f"{k}: {rows[k]['arms']} arms, {rows[k]['runs']} runs")
chosen = rows[pick]
present = set(chosen["percentiles"].split(", "))
#: SLO limit -> (label, unit, default, the percentile columns that judge it)
LIMITS = {"ttft_p90_ms": ("TTFT p90", "ms", 2000.0, {"ttft_p90_ms", "ttft_p99_ms"}),
          "ttft_p99_ms": ("TTFT p99", "ms", 0.0, {"ttft_p99_ms"}),
          "itl_p90_ms": ("ITL p90", "ms", 0.0, {"itl_p90_ms", "itl_p99_ms"}),
          "itl_p99_ms": ("ITL p99", "ms", 100.0, {"itl_p99_ms"}),
          "tpot_p99_ms": ("TPOT p99", "ms", 0.0, {"tpot_p99_ms"}),
          "latency_p99_s": ("end-to-end p99", "s", 0.0, {"latency_p99_s"})}
judgeable = {k: v for k, v in LIMITS.items() if v[3] & present}
cols = st.columns(len(judgeable))
slo = {}
for col, (field, (label, unit, default, _)) in zip(cols, judgeable.items(), strict=True):
    v = col.number_input(f"{label} limit ({unit}; 0 = none)", 0.0, 1e6, default, key=f"slo_{field}",
                         persist_state="session",
                         help=f"the SLO: the benchmark's {label} must be at most this")
    if v > 0:
        slo[field] = float(v)
st.caption("Limits this model's benchmarks carry no percentile for are not offered: "
           + (", ".join(v[0] for k, v in LIMITS.items() if k not in judgeable) or "none") + ".")
if not slo:
    st.info("State at least one latency limit.")
    widgets.stop()

c1, c2, c3, c4 = st.columns(4)
risk = c1.slider("stated risk (share of bins short)", 0.01, 0.30, 0.05, 0.01, key="fleet_risk",
                 persist_state="session",
                 help="the Learn-then-Test violation target of the certified demand")
delta = c2.select_slider("certificate failure probability (delta)", [0.01, 0.05, 0.1, 0.2],
                         value=0.1, key="fleet_delta", persist_state="session")
scale = c3.select_slider("traffic scale (scenario)", [1, 10, 30, 100, 300, 1000, 10000],
                         value=1000, key="fleet_scale", persist_state="session",
                         help="a public trace is one tenant's sample: multiplies demand")
min_replicas = c4.number_input("fewest replicas kept up", 0, 1000, 1, key="fleet_min",
                               persist_state="session")
caps = [c for c in (0.0, 0.01, 0.02, 0.05, 0.1) if c < risk]
cap_risk = st.select_slider("of which capacity risk", caps, value=0.0, key="fleet_cap_risk",
                            format_func=lambda c: "0 (measured knee)" if c == 0 else f"{c:g}",
                            help="0: one replica serves its measured knee, taken as exact. "
                                 "Above 0: it is planned at the knee's held-out-cell lower "
                                 "bound at that miscoverage (the cost model's prediction from "
                                 "the fit that never saw the knee's cell), and the demand "
                                 "certificate gets the rest of the stated risk")
share, share_from = None, None
if info["kind"] != "requests":
    requests = [n for n in cache.dataset_names(("requests",)) if n != name]
    how = st.radio("output tokens in this series", ["share of a request dataset", "a stated share"],
                   horizontal=True, key="fleet_share_how", persist_state="session",
                   help="a pre-binned series does not say how many of its tokens are output "
                        "tokens: take the completion share of a request trace of the same "
                        "traffic, or state it")
    if how == "a stated share" or not requests:
        share = st.number_input("share of the series' tokens that are output tokens", 0.01, 1.0,
                                0.35, 0.01, key="fleet_share", persist_state="session")
    else:
        share_from = st.selectbox("request dataset", requests, key="fleet_share_from",
                                  persist_state="session")
g1, g2, g3 = st.columns(3)
sites = cache.site_catalog()
sites = sorted(set(sites.loc[sites["tbl"] == "carbon_intensity", "site"])) if len(sites) else []
site = g1.selectbox("carbon site (its stored series' mean)", ["none", *sites], key="fleet_site",
                    persist_state="session",
                    help="a stored carbon-intensity site; or none and state an intensity")
gco2 = 0.0
if site == "none":
    gco2 = g2.number_input("grid carbon intensity (gCO2/kWh; 0 = none)", 0.0, 2000.0, 0.0,
                           10.0, key="fleet_gco2", persist_state="session")
pue = g3.number_input("PUE", 1.0, 3.0, 1.0, 0.01, key="fleet_pue", persist_state="session")

req = fleet_data.request(chosen["model"], slo, risk=float(risk), capacity_risk=float(cap_risk),
                         delta=float(delta),
                         task=chosen["task"], scale=float(scale), min_replicas=int(min_replicas),
                         output_share=share, output_share_from=share_from,
                         gco2_per_kwh=float(gco2) or None, pue=float(pue),
                         site=None if site == "none" else site)
bin_s = BIN_CHOICES_S[bin_label]
try:
    with st.spinner("Fitting the envelope and planning each measured arm ..."):
        out = fleet_data.plan(name, req, bin_s)
except ValueError as exc:
    st.error(f"No fleet plan: {widgets.plain(exc)}")
    widgets.stop()
doc = fleet_data.document(out, name, req)
plan, arm = out["plan"], doc["arm"]
export = Export("Fleet plan", [name] + ([share_from] if share_from else []))
export.param(dataset=name, bin=bin_label, model=chosen["model"], task=chosen["task"],
             slo=", ".join(f"{k} <= {v:g}" for k, v in slo.items()), risk=risk,
             capacity_risk=cap_risk, delta=delta,
             traffic_scale=scale, min_replicas=min_replicas, output_share=doc["output_share"],
             gco2_per_kwh=gco2 or None, carbon_site=None if site == "none" else site, pue=pue)

e, b = doc["economics"], doc["backtest"]
m = st.columns(5)
knee = "unmeasured" if arm["concurrency"] is None else f"{int(arm['concurrency'])} concurrent"
m[0].metric("arm", arm["hardware"], f"x{arm['n_gpus']} TP{arm['tp']} {arm['precision']}, knee "
            f"{knee}", delta_color="off", delta_arrow="off",
            help=f"{arm['label']}: the arm whose replicas are planned")
m[1].metric("replicas (test window)", f"{doc['replicas']['min']}-{doc['replicas']['max']}",
            f"flat peak {doc['replicas']['peak']}", delta_color="off", delta_arrow="off")
m[2].metric("GPU-hours planned", f"{e['planned_gpu_h']:,.1f}",
            f"{e['peak_gpu_h']:,.1f} at the flat peak", delta_color="off", delta_arrow="off")
m[3].metric("$ per 1M output tokens", "not priced" if doc["usd_per_1m_tokens"] is None
            else f"{doc['usd_per_1m_tokens']:,.2f}")
m[4].metric("backtest: short bins", f"{b['shortfall_bins']} / {b['bins']}",
            f"{b['shortfall_rate']:.1%} vs stated {doc['risk']['total']:.0%}",
            delta_color="normal" if b["within_risk"] else "inverse", delta_arrow="off")
n = st.columns(4)
n[0].metric("J per output token", "not measured" if e["j_per_token"] is None
            else f"{e['j_per_token']:.3f}")
n[1].metric("energy (test window)", "not measured" if e["energy_kwh"] is None
            else ("at least " if e["energy_lower_bound"] else "") + f"{e['energy_kwh']:,.2f} kWh",
            help="busy seconds only where the catalog states no idle power (a lower bound)")
n[2].metric("gCO2 per 1M tokens", "no intensity" if e["gco2_per_1m_tokens"] is None
            else f"{e['gco2_per_1m_tokens']:,.0f}")
n[3].metric("$ per day", "not priced" if e["usd_per_day"] is None else f"{e['usd_per_day']:,.0f}")
st.caption(f"Stated risk: P(a {bin_label} bin falls short) <= {doc['risk']['demand']:g} "
           f"(demand, certified with probability {1 - delta:.0%}) + {doc['risk']['capacity']:g} "
           "(capacity), a union bound; the backtest replays the test window, which neither the "
           "envelope nor the factor saw. Arm chosen by " + doc["chosen_by"] + ". One replica: "
           f"{doc['replica']['tok_s']:,.0f} output tokens/s ({doc['replica']['basis']}).")
if doc["carbon_basis"]:
    st.caption(f"Carbon intensity: {doc['economics']['gco2_per_kwh']:,.0f} gCO2/kWh, "
               f"{widgets.plain(doc['carbon_basis'])}.")
if doc["output_share_basis"]:
    st.caption(f"Output tokens: {widgets.plain(doc['output_share_basis'])} "
               f"(share {doc['output_share']:.3f}).")

export.chart(cache.figure(charts.replicas_chart, plan.frame, arm["label"], bin_label, synthetic),
             key="fleet_replicas_chart", title="Planned replicas against the certified demand")
export.chart(cache.figure(charts.hourly_replicas_chart, doc["replicas"]["by_hour_utc"],
                          synthetic), key="fleet_hourly_chart",
             title="Planned replicas by hour of day (UTC)")
st.caption("The hourly profile is the most replicas planned in each UTC hour over the "
           "calibration and test bins (both provisioned from out-of-sample bands); an hour "
           "without a bin takes the busiest hour. The KEDA cron triggers carry it.")

st.subheader("Every measured arm that meets the SLO")
export.table(pd.DataFrame(doc["arms"]), "fleet_arms", "Arms that meet the SLO, ranked",
             hide_index=True)
if doc["not_meeting"]:
    export.table(pd.DataFrame(doc["not_meeting"]), "fleet_not_meeting",
                 "Arms that do not meet the SLO, and why", hide_index=True)
if doc.get("predicted"):
    pr = doc["predicted"]
    st.caption(f"Arms no benchmark ran, predicted ({widgets.plain(pr['rule'])}): "
               f"{len(pr['meets'])} meet the SLO"
               + "".join(f", {n} {status}" for status, n in pr["counts"].items()) + ".")
    if pr["examples"]:
        export.table(pd.DataFrame(pr["examples"]), "fleet_predicted_out",
                     "Predicted arms that do not meet the SLO (examples)", hide_index=True)
for note in doc["notes"]:
    st.caption(widgets.plain(note))

st.subheader("Launch it")
max_len = st.number_input("context length written as --max-model-len (0 = the model's)", 0,
                          1_000_000, 0, key="fleet_max_len", persist_state="session")
prom = fleet_data.prometheus_url()
st.caption("The KEDA trigger's Prometheus address is operator configuration "
           "($HEADROOM_PROMETHEUS_URL, or `headroom plan --emit k8s --prometheus-url`): "
           + ("set, written into the Kubernetes file." if prom else
              "none is set, so the Kubernetes file has the cron triggers only."))
files = {"vllm": ("vllm serve command", "vllm-serve.sh", "text/x-shellscript"),
         "k8s": ("Kubernetes Deployment + KEDA ScaledObject", "fleet-k8s.yaml", "text/yaml"),
         "skyserve": ("SkyServe service", "skyserve.yaml", "text/yaml"),
         "slurm": ("Slurm batch script", "fleet.sbatch", "text/x-shellscript")}
try:
    texts = {t: fleet_data.export(out, chosen["model"], t, max_model_len=int(max_len) or None,
                                  prometheus_url=prom) for t in files}
except ValueError as exc:
    st.warning(f"No launch files for this arm: {widgets.plain(exc)}")
else:
    st.code(texts["vllm"], language="bash")
    d = st.columns(len(files))
    for col, (t, (label, fname, mime)) in zip(d, files.items(), strict=True):
        col.download_button(label, texts[t], file_name=fname, mime=mime, key=f"fleet_dl_{t}")
    with st.expander("Kubernetes + KEDA"):
        st.code(texts["k8s"], language="yaml")
export.render()
