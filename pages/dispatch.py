"""Dispatch: split the demand envelope across sites to cut tCO2e."""

import pandas as pd
import streamlit as st
from analytics.config import BIN_CHOICES_S, GPU_CATALOG
from analytics.ui import cache, charts, scenario, widgets
from analytics.ui.export import Export

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Dispatch")

name, info = widgets.chosen_dataset()
synthetic = bool(info["synthetic"])
catalog = cache.site_catalog()
carbon = catalog[catalog["tbl"] == "carbon_intensity"]
carbon_sites = sorted(carbon["site"].unique())
# a code registered for a series stored under another (SustainDC's CISO_ and CA_ files hold the
# same bytes): offered too, labelled with the code the series is stored as
stored_as = {s: g["alias_of"].iloc[0] for s, g in carbon.groupby("site")
             if g["alias_of"].notna().all()}
if not carbon_sites:
    st.info("No carbon-intensity data yet. Ingest SustainDC `<BA>_NG_&_avgCI.csv` or Green-DCC "
            "carbon files on the Data page (weather and price files sharpen PUE and cost), "
            "or pull e.g. `sustaindc_carbon_ciso`.")
    widgets.stop()

bin_label = widgets.intraday_bin(info, "dispatch_bin", "dispatch plans")
params = widgets.envelope_controls("dispatch")
default_sites = [s for s in ("CISO", "ERCO", "BPAT", "PJM", "NYIS") if s in carbon_sites]
sites = st.multiselect("Sites (allowed region set)", carbon_sites,
                       default=default_sites or carbon_sites[:3], key="sites", persist_state="session",
                       format_func=lambda s: f"{s} (= {stored_as[s]})" if s in stored_as else s,
                       help="A code shown as 'CISO (= CA)' names the same published series as "
                            "CA (one file published under both names).")
if not sites:
    st.info("Choose at least one site.")
    widgets.stop()
site_synth = widgets.synthetic_among(carbon.loc[carbon["site"].isin(sites), "dataset"].unique())
synthetic = widgets.warn_synthetic(site_synth, "carbon intensity") or synthetic
c1, c2, c3, c4 = st.columns(4)
home = c1.selectbox("home site (baseline)", sites, key="home", persist_state="session")
# default: 40 % per site, or the least share that lets the chosen sites carry all demand
fit_share = -(-100 // (5 * len(sites))) * 5 / 100  # 1 / n sites, rounded up to 5 %
max_share = c2.slider("max share of an hour per site", 0.1, 1.0, max(0.4, fit_share), 0.05,
                      key="max_share", persist_state="session")
scale = c3.select_slider("traffic scale (scenario)", [1, 10, 100, 1000, 10000], value=1000,
                         key="dispatch_scale", persist_state="session")
kinds = [k for k in GPU_CATALOG if k.ref_tok_s]
kind_name = c4.selectbox("GPU kind (energy per token)", [k.name for k in kinds],
                         index=[k.name for k in kinds].index("H100-80GB"), key="gpu_kind",
                         persist_state="session")
kind = next(k for k in kinds if k.name == kind_name)
c5, c6, c7, c8 = st.columns(4)
offset = c5.number_input("alignment offset (days)", -180, 180, 0, key="offset_days", persist_state="session")
basis = c6.selectbox("carbon basis", ["auto", "avg", "LCA", "direct"], key="basis", persist_state="session")
utilisation = c7.slider("GPU utilisation", 0.1, 1.0, 0.8, 0.05, key="dispatch_util", persist_state="session")
FILLS = {"refuse and name them": "none", "forward fill": "ffill", "interpolate": "interpolate"}
fill_label = c8.selectbox(
    "missing site hours", list(FILLS), key="fill_missing", persist_state="session",
    help="Trace hours whose carbon, temperature or price hour is absent or blank in a site's "
         "data: refuse and name them (checked before any fitting), carry the last earlier "
         "site hour forward, or interpolate linearly between the site hours around them.")
SERVED = {"provisioned capacity (overbooking factor x rolling band)": "provisioned",
          "envelope upper bound (no overbooking)": "upper"}
d1, d2, d3 = st.columns([2, 1, 1])
served_label = d1.radio(
    "dispatched", list(SERVED), key="dispatched", persist_state="session", horizontal=True,
    help="What the sites serve each hour: the capacity the Capacity page provisions (the "
         "Learn-then-Test overbooking factor at the violation target below, times the rolling "
         "band's upper bound), or the rolling band's upper bound itself.")
served = SERVED[served_label]
violation_target = d2.slider("violation target", 0.01, 0.30, 0.05, 0.01,
                             key="dispatch_violation", persist_state="session",
                             disabled=served != "provisioned")
delta = d3.select_slider("LTT delta", [0.01, 0.05, 0.1, 0.2], value=0.1,
                         key="dispatch_delta", persist_state="session",
                         disabled=served != "provisioned")
st.caption("Site data (carbon 2022/2023, weather, prices) rarely share the trace's year: each "
           "trace hour takes the site values of the same day-of-year and hour, shifted by the "
           "offset. BurstGPT dates are relative, so this pairing is a scenario, not a replay.")

try:  # first, the site data the plan plays with (no fit)
    st.plotly_chart(charts.label_synthetic(charts.carbon_profile_chart(
        cache.site_carbon_profile(sites, None if basis == "auto" else basis)), bool(site_synth)),
        key="carbon_profile_chart")
except KeyError:
    pass  # the plan below names the site without carbon data
if len(sites) * max_share < 1:
    st.error(f"{len(sites)} sites x max share {max_share:.0%} cannot carry the whole demand; "
             "allow a larger share or more sites.")
    widgets.stop()
try:
    with st.spinner("Fitting the envelope and solving the dispatch LP ..."):
        plan, notes = cache.dispatch_plan(name, BIN_CHOICES_S[bin_label], params, sites, kind,
                                          float(scale), utilisation, int(offset),
                                          None if basis == "auto" else basis, home, max_share,
                                          fill_missing=FILLS[fill_label], dispatched=served,
                                          violation_target=violation_target, delta=delta)
except (ValueError, KeyError) as exc:
    st.error(f"No dispatch: {widgets.plain(str(exc))}")
    if hasattr(exc, "gaps") and FILLS[fill_label] == "none":  # say where the choice is
        st.info("Pick **forward fill** or **interpolate** under *missing site hours* to fill "
                "them, shift the alignment offset, or leave the site out.")
    widgets.stop()
site_sets = catalog[catalog["site"].isin(sites)]["dataset"].dropna().unique().tolist()
out = Export("Dispatch", [name, *site_sets])
out.param(dataset=name, bin=bin_label, alpha=params.alpha, base_model=params.base_model,
          sites=", ".join(sites), home_site=home, max_share=max_share, traffic_scale=scale,
          gpu_kind=kind_name, alignment_offset_days=int(offset), carbon_basis=basis,
          utilisation=utilisation, missing_site_hours=FILLS[fill_label], dispatched=served,
          **({"violation_target": violation_target, "ltt_delta": delta}
             if served == "provisioned" else {}))
if served == "provisioned":
    got = plan.dispatched
    st.caption(f"Dispatched: the provisioned capacity, overbooking factor "
               f"{got['overbooking_factor']:.2f} x the rolling band's upper bound"
               + ("" if got["certified"] else
                  " (no factor was certified at this violation target: the largest tried, as "
                  "Capacity provisions then)") + ".")
if plan.filled:
    st.warning("Missing site hours were filled: " + "; ".join(
        f"{widgets.plain(f['site'])} {f['series'].replace('_', ' ')}: {f['hours']} hours by "
        f"{f['method']}" for f in plan.filled))
    out.table(pd.DataFrame([{k: f[k] for k in ("site", "series", "series_site", "hours",
                                                "method")} for f in plan.filled]),
              "filled_table", "Filled site hours")

t = plan.totals.set_index("policy")
m1, m2, m3, m4 = st.columns(4)
m1.metric("tCO2e, all at home", f"{t.loc['home', 'tco2e']:.4g}")
m2.metric("tCO2e, capacity-proportional", f"{t.loc['proportional', 'tco2e']:.4g}")
m3.metric("tCO2e, carbon-aware", f"{t.loc['carbon_aware', 'tco2e']:.4g}",
          f"{t.loc['carbon_aware', 'tco2e'] / t.loc['home', 'tco2e'] - 1:+.1%} vs home",
          delta_color="inverse")
m4.metric("IT energy served", f"{t.loc['carbon_aware', 'it_mwh']:.3f} MWh",
          help="the same in every policy: every hour's demand is served")
out.chart(charts.policy_bars(plan.totals.reset_index(drop=True), synthetic),
          key="policy_bars", title="tCO2e by policy")
out.keep(plan.totals, "policy_totals", "Totals by policy")
out.chart(charts.dispatch_share_chart(plan.shares, "carbon_aware", synthetic),
          key="share_chart", title="Carbon-aware hourly shares")
out.chart(charts.carbon_lines_chart(plan.shares, synthetic), key="carbon_chart",
          title="Carbon intensity per site")
out.keep(plan.shares, "hourly_dispatch", "Hourly dispatch (every policy, site and hour)")

st.subheader("Sites")
out.table(plan.per_site.pivot(index="site", columns="policy", values="share")
             .join(plan.per_site[plan.per_site["policy"] == "home"]
                   .set_index("site")[["mean_gco2_per_kwh", "mean_pue"]]),
          "site_table", "Sites")
for n in dict.fromkeys(notes + plan.notes):  # each note once, in order
    st.caption(n)
    out.note(n)
temps, pues = cache.pue_curve()
out.chart(charts.pue_chart(temps, pues), key="pue_chart", title="PUE against temperature",
          from_data=False)
out.render()
