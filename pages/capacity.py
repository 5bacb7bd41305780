"""Capacity: turn the envelope into provisioned GPUs - calibrated overbooking and a GPU mix."""

from dataclasses import replace

import pandas as pd
import streamlit as st
from analytics.config import BIN_CHOICES_S, GPU_CATALOG, DemandTarget
from analytics.ui import cache, charts, scenario, widgets
from analytics.ui.export import Export

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Capacity")

name, info = widgets.chosen_dataset()
synthetic = bool(info["synthetic"])
bin_label = widgets.intraday_bin(info, "capacity_bin", "capacity plans")
params = widgets.envelope_controls("capacity")

c1, c2, c3, c4 = st.columns(4)
target = c1.slider("target SLO violation rate", 0.01, 0.30, 0.05, 0.01, key="target_violation",
                   persist_state="session",
                   help="share of bins whose demand may exceed capacity")
delta = c2.select_slider("certificate failure probability (delta)", [0.01, 0.05, 0.1, 0.2],
                         value=0.1, key="delta", persist_state="session")
scale = c3.select_slider("traffic scale (scenario)", [1, 10, 100, 1000, 10000], value=1000,
                         key="scale",
                         persist_state="session", help="multiplies demand before it is turned into GPUs")
objective = c4.radio("GPU mix objective", ["cost", "power", "carbon"], horizontal=True,
                     key="objective", persist_state="session")
gco2 = None
if objective == "carbon":
    gco2 = st.number_input("grid carbon intensity (gCO2/kWh)", 0.0, 2000.0, 400.0, 10.0,
                           key="gco2",
                           persist_state="session", help="one site's intensity; at a single site carbon "
                           "ranks GPU kinds as power does - see Dispatch for sites over time")

with st.expander("GPU catalog (editable; every default has a source)"):
    catalog = pd.DataFrame([{
        "kind": k.name, "use": True, "memory_gb": k.memory_gb, "tdp_w": k.tdp_w,
        "idle_w": k.idle_w, "price_usd_per_h": k.price_usd_per_h, "ref_tok_s": k.ref_tok_s,
        "available": None} for k in GPU_CATALOG])
    edited = st.data_editor(catalog, hide_index=True, disabled=["kind"], key="catalog")
    st.caption("Empty cells have no sourced value: enter one to include that kind. Reference "
               "throughputs come from different ML.ENERGY leaderboard versions (v2 for A100, "
               "v3 for H100/B200) and are output tokens/s for Llama-3.1-8B-Instruct.")
    for k in GPU_CATALOG:
        st.caption(f"**{k.name}**: " + "; ".join(f"{f}: {src}" for f, src in k.sources))
utilisation = st.slider("GPU utilisation for power", 0.1, 1.0, 0.8, 0.05, key="utilisation",
                        persist_state="session")

kinds, available = [], {}
for row, k in zip(edited.itertuples(), GPU_CATALOG, strict=True):
    if not row.use:
        continue
    kinds.append(replace(
        k, idle_w=None if pd.isna(row.idle_w) else float(row.idle_w),
        price_usd_per_h=None if pd.isna(row.price_usd_per_h) else float(row.price_usd_per_h),
        ref_tok_s=None if pd.isna(row.ref_tok_s) else float(row.ref_tok_s),
        tdp_w=float(row.tdp_w)))
    if not pd.isna(row.available):
        available[k.name] = int(row.available)

demand_target = cache.targets(name)[0]  # the plan's default demand target
try:  # first, the windows the envelope will be fitted, calibrated and tested on (no fit)
    preview = cache.split_preview(name, BIN_CHOICES_S[bin_label], params, target=demand_target)
    st.plotly_chart(charts.split_chart(preview, name, bin_label, synthetic,
                                       DemandTarget(demand_target).label), key="split_chart")
    st.caption("The overbooking factor is chosen on the calibration window and checked on the "
               "test window, which it never sees.")
except ValueError:
    pass  # the plan below says why there is none
try:
    with st.spinner("Fitting the envelope and choosing the overbooking factor ..."):
        plan = cache.capacity_plan(name, BIN_CHOICES_S[bin_label], params, kinds, target, delta,
                                   objective, available, utilisation, float(scale), gco2)
except ValueError as exc:
    st.error(f"No capacity plan: {widgets.plain(exc)}")
    widgets.stop()

ob = plan.overbooking
out = Export("Capacity", [name])
out.param(dataset=name, bin=bin_label, alpha=params.alpha, horizon_bins=params.horizon,
          base_model=params.base_model, target_violation_rate=target, delta=delta,
          traffic_scale=scale, mix_objective=objective, utilisation=utilisation,
          grid_gco2_per_kwh=gco2, gpu_kinds=", ".join(k.name for k in kinds))
m1, m2, m3, m4 = st.columns(4)
m1.metric("overbooking factor", "none certified" if ob.factor is None else f"{ob.factor:.2f}")
m2.metric("test violations", f"{ob.test['violations']} / {ob.test['bins']}",
          f"{ob.test['violation_rate']:.1%} vs target {target:.0%}", delta_color="off",
          delta_arrow="off")
m3.metric("test shortfall", f"{ob.test['shortfall_fraction']:.2%}",
          help="demand above capacity, as a share of test-window demand")
m4.metric("calibration violations", f"{ob.calibration['violation_rate']:.1%}")
if ob.factor is None:
    st.warning(f"No factor on the grid (up to {ob.curve['factor'].max():.2f}) could be certified "
               f"below {target:.0%} on {ob.calibration['bins']} calibration bins; the largest "
               "is shown. Allow a higher target, a larger delta or a longer calibration window.")
else:
    st.caption(f"f is the smallest factor whose violation risk Learn-then-Test certifies below "
               f"{target:.0%} with probability {1 - delta:.0%} on the calibration window "
               f"({ob.calibration['bins']} bins); the test window is never used to choose it.")
out.chart(charts.capacity_chart(ob.frame, ob.factor, plan.unit, bin_label, synthetic),
          key="capacity_chart", title="Demand, envelope and provisioned capacity")
out.keep(ob.frame, "capacity_frame",
         "Per-bin demand, forecast, out-of-sample residual, envelope and capacity")
st.subheader("Factor / violation trade-off")
out.chart(charts.overbooking_chart(ob.curve, target, ob.factor, synthetic),
          key="overbooking_chart", title="Violation rate against the overbooking factor")
st.caption("Each factor's calibration violation rate is measured on out-of-sample bands: each "
           "calibration bin's band comes from the other calibration residuals, the same "
           "residuals that seed the envelope's rolling window. The LTT bound is the least "
           f"target Learn-then-Test certifies at that rate with probability {1 - delta:.0%}; "
           "the chosen f is the smallest factor whose bound meets the target. The test curve "
           "is shown for comparison and never used to choose f.")
out.keep(ob.curve, "overbooking_curve",
         "Learn-then-Test curve (factor, violation rates, p-value, LTT bound, certified)")

st.subheader("GPU-hours on the test window: envelope vs peak provisioning")
out.table(plan.gpu_hours, "gpu_hours_table", "GPU-hours on the test window", hide_index=True,
          column_config={
              "envelope_gpu_h": st.column_config.NumberColumn("envelope GPU-h", format="%.1f"),
              "peak_gpu_h": st.column_config.NumberColumn("peak GPU-h", format="%.1f"),
              "saved_gpu_h": st.column_config.NumberColumn("saved GPU-h", format="%.1f"),
              "saved_fraction": st.column_config.NumberColumn("saved", format="percent")})
for kind, why in plan.excluded.items():
    st.caption(f"{kind} left out of the {'GPU-hours table and the ' if 'throughput' in why else ''}"
               f"GPU mix: {why}")
if plan.mix.empty and plan.unit == "GPU-seconds":
    st.caption("No GPU mix: this trace counts GPU-seconds on its own hardware, so there is no "
               "per-kind throughput to trade kinds against.")
if not plan.mix.empty:
    out.chart(charts.mix_chart(plan.mix, synthetic), key="mix_chart", title="GPU mix")
    out.keep(plan.mix, "gpu_mix", "GPU mix")
    st.caption(f"Total over the test window: ${plan.mix['cost_usd'].sum():,.2f}, "
               f"{plan.mix['power_kw'].sum():,.1f} kWh of GPU energy at {utilisation:.0%} "
               "utilisation (IT only; see Dispatch for PUE and carbon).")


def headline(saved_params: dict) -> dict:
    """The numbers a planner compares, for a saved scenario's values (the GPU catalog edits
    above apply to every scenario), as text."""
    p = scenario.typed("capacity", saved_params)
    env = widgets.envelope_params(p["envelope_alpha"], p["envelope_horizon"],
                                  p["envelope_base_model"], p["envelope_split"])
    pl = cache.capacity_plan(p["dataset"], BIN_CHOICES_S[p["envelope_bin"]], env, kinds,
                             p["target_violation"], p["delta"], p["objective"], available,
                             p["utilisation"], float(p["scale"]), p.get("gco2"))
    o = pl.overbooking
    return {"dataset": p["dataset"], "bin": p["envelope_bin"], "alpha": f"{p['envelope_alpha']:g}",
            "target violation rate": f"{p['target_violation']:.0%}",
            "traffic scale": f"{p['scale']:,}x",
            "overbooking factor": "none certified" if o.factor is None else f"{o.factor:.2f}",
            "test violation rate": f"{o.test['violation_rate']:.1%}",
            "test shortfall": f"{o.test['shortfall_fraction']:.2%}",
            "envelope GPU-h": f"{pl.gpu_hours['envelope_gpu_h'].sum():,.1f}",
            "peak GPU-h": f"{pl.gpu_hours['peak_gpu_h'].sum():,.1f}",
            "GPU mix cost (USD)": "no mix" if pl.mix.empty else f"{pl.mix['cost_usd'].sum():,.2f}"}


st.subheader("Scenarios")
st.caption("The address bar always holds this scenario: copy it to share it. Save it under a "
           "name to reopen it later or compare two side by side.")
s1, s2, s3 = st.columns([3, 1, 1])
s1.text_input("scenario name", key="scenario_name", persist_state="session", max_chars=80,
              placeholder="e.g. 99.9% envelope at 1000x traffic")
s2.button("Save", key="scenario_save", on_click=scenario.save_current, args=("capacity",))
saved = scenario.saved("capacity")
names = [sc["name"] for sc in saved]
if names:
    s1.selectbox("saved scenarios", names, key="scenario_open", persist_state="session")
    s3.button("Open", key="scenario_open_button", on_click=scenario.open_saved,
              args=("capacity",))
if msg := st.session_state.pop("scenario_msg", None):
    getattr(st, msg[0])(widgets.plain(msg[1]))
if len(names) >= 2:
    pair = st.multiselect("compare two saved scenarios", names, max_selections=2,
                          key="scenario_pair", persist_state="session")
    if len(pair) == 2 and st.button("Compare", key="scenario_compare"):
        try:
            with st.spinner("Computing both scenarios ..."):
                rows = {n: headline(next(sc["params"] for sc in saved if sc["name"] == n))
                        for n in pair}
        except (ValueError, KeyError) as exc:
            st.error(f"Cannot compare: {widgets.plain(exc)}")
        else:
            st.session_state["scenario_table"] = pd.DataFrame(rows)
    if "scenario_table" in st.session_state:
        out.table(st.session_state["scenario_table"], "scenario_table",
                  "Saved scenarios side by side")
        st.caption("Same GPU catalog for both; each scenario's envelope is fitted once and "
                   "kept for the next comparison.")
out.render()
