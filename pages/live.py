"""Live: a running fleet's demand against its envelope, bin by bin (issue 29 item 7). The
bins come from ``headroom live --follow``, which the operator runs against their Prometheus;
this page reads what it stored and refreshes the newest bins in a fragment (no page rerun)."""

import pandas as pd
import streamlit as st
from analytics.config import BIN_CHOICES_S
from analytics.ui import charts, scenario, widgets
from analytics.ui import live as live_data

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Live")
st.caption("Demand of a running model, read from the operator's Prometheus and judged bin by "
           "bin against a conformal envelope started from a stored trace (ACI). Every bin is "
           "stored, so the coverage shown is measured. The Prometheus address is operator "
           "configuration (`headroom live --prometheus URL` or $HEADROOM_PROMETHEUS_URL): "
           "this page never connects out.")

START = ("headroom live --prometheus http://PROMETHEUS:9090 --model MODEL_NAME "
         "--history DATASET --follow")
runs = live_data.runs()
if not runs:
    st.info("No live run is stored yet. Start one next to your Prometheus (the history is a "
            "demand dataset of this store, e.g. an ingested trace of the same model); its bins "
            "appear here as they close:")
    st.code(START, language="bash")
    widgets.stop()


def label(r: dict) -> str:
    return (f"{r['name']}: {r['model']} (from {r['first_ts'][:16].replace('T', ' ')} UTC, "
            f"history {r['history']}, alpha {r['alpha']:g})")


pick = st.selectbox("run", range(len(runs)), format_func=lambda i: label(runs[i]),
                    key="live_run")
name = runs[pick]["name"]
bin_label = next((k for k, v in BIN_CHOICES_S.items() if v == runs[pick]["bin_s"]),
                 f"{runs[pick]['bin_s']} s")


@st.fragment(run_every=f"{live_data.REFRESH_S}s")
def newest() -> None:
    try:
        view = live_data.view(name)
    except KeyError:
        st.info("That run is no longer stored.")
        return
    run, last = view["run"], view["last"]
    if last is None:
        st.info(f"Run {widgets.plain(name)} has no closed bin yet: `headroom live --follow` "
                "stores the first one a bin width after it starts.")
        return
    if last["alarm"]:
        st.error(f"Alarm: {widgets.plain(last['alarm_reason'])} (bin of "
                 f"{pd.Timestamp(last['ts']):%Y-%m-%d %H:%M} UTC).")
    c = st.columns(5)
    cov = view["coverage_so_far"]
    c[0].metric("coverage so far", "n/a" if cov is None else f"{cov:.1%}",
                help=f"Share of the run's {run['bins'] - run['gaps']:,} bins with known demand "
                     f"inside their band; the band aims at {view['target']:.0%}.")
    c[1].metric("bins closed", f"{run['bins']:,}",
                help=f"{run['gaps']:,} of them with unknown demand (a scrape gap: no sample "
                     "to count from), never counted as 0")
    c[2].metric("newest bin (UTC)", f"{pd.Timestamp(last['ts']):%m-%d %H:%M}")
    demand = last["demand"]
    c[3].metric("newest demand", "unknown" if pd.isna(demand) else f"{demand:,.0f}",
                help=f"weighted tokens in the bin; band {last['lower']:,.0f} to "
                     f"{last['upper']:,.0f}" if not pd.isna(last["upper"]) else None)
    jpt = last.get("j_per_token")
    gpt = last.get("gco2_per_token")
    c[4].metric("J/token", "n/a" if jpt is None or pd.isna(jpt) else f"{jpt:.3g}",
                help=("energy the run's GPUs used in the newest bin (DCGM energy counter) per "
                      "token" + ("" if gpt is None or pd.isna(gpt) else
                                 f"; {gpt * 1000:.3g} mgCO2/token at the site's hourly carbon "
                                 "intensity")) if run.get("energy") else
                "no GPUs named: start the run with --energy-selector to measure it")
    served = live_data.serving_row(last)
    if served:  # the engine's own serving metrics, where it exposes them
        for col, (label, shown, why) in zip(st.columns(len(served)), served, strict=True):
            col.metric(label, shown, help=why)
    if cov is not None and run["bins"] - run["gaps"] >= 100 and cov < view["target"] - 0.05:
        st.warning(f"Coverage so far {cov:.1%} is below the {view['target']:.0%} the band aims "
                   "at: the history no longer describes this traffic; refit on a newer one.")
    if not pd.isna(last["gap_reason"]):
        st.caption(f"Newest bin unknown: {widgets.plain(last['gap_reason'])}")
    st.plotly_chart(charts.live_chart(view["bins"], run["model"], float(run["alpha"]),
                                      bin_label), key="live_chart")
    refits = view["bins"].dropna(subset=["refit"])
    st.caption(f"The last {len(view['bins']):,} bins; refreshed every {live_data.REFRESH_S} s."
               + ("" if not run.get("dataset") else
                  f" Every bin of known demand is appended to dataset "
                  f"{widgets.plain(run['dataset'])} as it closes (the Demand and Data pages "
                  "read it like a trace).")
               + ("" if refits.empty else
                  f" Last refit at the bin of {pd.Timestamp(refits['ts'].iloc[-1]):%m-%d %H:%M} "
                  f"UTC: {widgets.plain(refits['refit'].iloc[-1])}."))


newest()
with st.expander("How to run it"):
    st.markdown("Follow a model (a restart resumes from the last stored bin and back-fills "
                "what it missed):")
    st.code(START, language="bash")
    st.markdown("Alerting rules and a Grafana dashboard over headroom's `/metrics`:")
    st.code("headroom live-config --out monitoring/", language="bash")
