"""Sweeps: the sweep results kept in the store, the result a planner comes back to (issue 31
item 11): list, filter by analysis, open one (its points, and a power sweep's chart with its
95 % bands), delete."""

import streamlit as st
from analytics.ui import cache, charts, scenario, widgets

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Sweeps")
st.caption("Every sweep point headroom computed (the Power page's inference-share sweep, "
           "`headroom powersim --sweep`, the serving sensitivity, the envelope atlas, the "
           "advisor's fold fits) is kept in the store with where it ran and how long it took; "
           "a rerun with the same data, parameters and code reads them instead of computing.")
ANALYSES = {"power.sweep_point": "Power: inference-share sweep",
            "serving.sensitivity_point": "Serving: sensitivity",
            "serving.policy_run": "Serving: policy runs",
            "envelope.atlas_cell": "Coverage: envelope atlas",
            "advisor.fold": "Placement: cost-model fold fits"}
if flash := st.session_state.pop("flash_sweeps", None):
    st.success(flash)
runs = cache.sweep_ledger()
if not runs:
    st.info("No sweep is stored yet. Run one on the Power page ('Run the sweep'), the Serving "
            "page's sensitivity, the Coverage page's atlas, or with `headroom powersim "
            "--sweep`; it is kept here.")
    widgets.stop()
kinds = sorted({r["analysis"] for r in runs})
shown = st.multiselect("analysis", kinds, default=kinds, key="sweeps_filter",
                       persist_state="session", format_func=lambda a: ANALYSES.get(a, a))
rows = [r for r in runs if r["analysis"] in shown]
st.dataframe(rows, hide_index=True, key="sweeps_table", column_config={
    "analysis": st.column_config.TextColumn("analysis"),
    "tasks": st.column_config.NumberColumn("points", format="%d"),
    "cpu_s": st.column_config.NumberColumn("CPU (s)", format="%.1f"),
    "wall_s": st.column_config.NumberColumn("wall (s)", format="%.1f")})
if not rows:
    widgets.stop()


def label(r: dict) -> str:
    return (f"{ANALYSES.get(r['analysis'], r['analysis'])}: {r['tasks']} points, "
            f"{r['last_finished'][:16].replace('T', ' ')} UTC, {r['ran_on']} "
            f"(code {r['code_version']}, inputs {r['inputs_sha256']})")


pick = st.selectbox("open", range(len(rows)), format_func=lambda i: label(rows[i]),
                    key="sweeps_open")
chosen = rows[pick]
try:
    view = cache.sweep_view(chosen["analysis"], chosen["code_version"], chosen["inputs_sha256"])
except KeyError:
    st.info("That sweep is no longer stored.")
    widgets.stop()
if view["table"] is not None:
    st.plotly_chart(charts.power_sweep_chart(view["table"]), key="sweeps_chart")
    st.caption("Means over the stored replications with 95 % t-intervals (bands); drawn "
               "against the realised inference share.")
    st.dataframe(view["table"], hide_index=True, key="sweeps_cells")
with st.expander(f"{len(view['points'])} stored points"):
    st.dataframe(view["points"], hide_index=True, key="sweeps_points")
if st.button("Delete this sweep", key="sweeps_delete"):
    st.session_state["sweeps_confirm"] = (chosen["analysis"], chosen["code_version"],
                                          chosen["inputs_sha256"])
if st.session_state.get("sweeps_confirm") == (chosen["analysis"], chosen["code_version"],
                                              chosen["inputs_sha256"]):
    st.warning(f"Delete the {chosen['tasks']} stored points of this sweep? A rerun computes "
               "them again.")
    if st.button("Yes, delete", key="sweeps_delete_yes", type="primary"):
        done = cache.delete_sweep(*st.session_state.pop("sweeps_confirm"))
        st.session_state["flash_sweeps"] = f"Deleted {done['deleted']} points."
        st.rerun()
