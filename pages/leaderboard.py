"""Leaderboard: every measured run as the ML.ENERGY leaderboard shows them (tokens/s per GPU,
J per token, $ per 1M tokens, TTFT / ITL percentiles), the Pareto front, and the launch
advisor's predicted arms with their calibrated intervals (abstentions marked)."""

import pandas as pd
import streamlit as st
from analytics.ui import cache, charts, scenario, whatifs, widgets
from analytics.ui import fleet as fleet_data
from analytics.ui.export import Export

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Leaderboard")
st.caption("Every benchmark run stored, per GPU: what was measured, not predicted. Sort any "
           "column; the chart's front is the runs no other run beats on both axes.")
board = fleet_data.leaderboard()
if board.empty:
    st.info("No benchmark run with a measured throughput yet: add the ML.ENERGY leaderboard, "
            "the Argonne tables or a `vllm bench serve` result on the Data page.")
    widgets.stop()
groups = board.groupby(["model", "task"], dropna=False).size().sort_values(ascending=False)
labels = {f"{m} ({t if isinstance(t, str) else 'any task'})": (m, t) for (m, t) in groups.index}
pick = st.selectbox("model (benchmark task)", list(labels), key="lb_model",
                    persist_state="session",
                    format_func=lambda k: f"{k}: {groups[labels[k]]} runs")
model, task = labels[pick]
rows = board[(board["model"] == model)
             & ((board["task"] == task) if isinstance(task, str) else board["task"].isna())]
c1, c2 = st.columns(2)
axis = c1.radio("against", list(charts.BOARD_AXES), horizontal=True, key="lb_axis",
                persist_state="session", format_func=charts.BOARD_AXES.get)
synthetic = bool(widgets.synthetic_among([], "bench_runs"))
if axis == "usd_per_1m_tokens" and rows["usd_per_1m_tokens"].isna().all():
    st.info("No run of this model is on a GPU kind the catalog prices: no $ axis.")

predicted, note = None, None
if whatifs.advisor_ready():
    conc = c2.number_input("predicted arms at concurrency", 1, 8192,
                           int(rows["concurrency"].median()), key="lb_conc",
                           persist_state="session")
    known = whatifs.bench_catalog().set_index("model")
    params_b = float(known.loc[model, "params_b"]) if model in known.index else float("nan")
    active = known.loc[model, "active_params_b"] if model in known.index else None
    lens = {c: float(rows[c].median()) if c in rows and rows[c].notna().any() else d
            for c, d in (("in_len", 1024.0), ("out_len", 512.0))}
    try:
        if not params_b == params_b:  # NaN: the runs do not say
            raise ValueError("the benchmark rows do not state the model's parameter count")
        req = whatifs.advisor_request(
            model=model, params_b=params_b, concurrency=float(conc), in_len=lens["in_len"],
            out_len=lens["out_len"], active_params_b=None if pd.isna(active) else float(active),
            task=task if isinstance(task, str) else "lm-arena-chat")
        predicted = fleet_data.predicted_arms(whatifs.advise(req, whatifs.default_prices()))
        note = (f"Predicted arms: the launch advisor's calibrated q10-q90 at {conc} concurrent, "
                f"{lens['in_len']:,.0f} / {lens['out_len']:,.0f} input / output tokens (the "
                "runs' median where they measure it, else the Placement page's defaults); "
                "grey crosses are outside measured support and abstain.")
    except (ValueError, KeyError) as exc:
        note = f"No predicted arms: {widgets.plain(exc)}"
else:
    st.caption("Fit the launch advisor on the Placement page to draw its predicted arms here "
               "(with their calibrated intervals) beside the measured runs.")

export = Export("Leaderboard", [])
export.param(model=model, task=task if isinstance(task, str) else None, axis=axis)
export.chart(cache.figure(charts.pareto_chart, rows, axis, predicted, synthetic),
             key="lb_pareto", title="Output tokens/s per GPU against " + charts.BOARD_AXES[axis])
if note:
    st.caption(note)
shown = rows.drop(columns=["model", "task"]).rename(columns={
    "pareto_energy": "on the J/token front", "pareto_usd": "on the $ front"})
export.table(shown, "leaderboard", "Measured runs", hide_index=True, column_config={
    "tok_s_per_gpu": st.column_config.NumberColumn("tok/s per GPU", format="%.0f"),
    "throughput_tok_s": st.column_config.NumberColumn("tok/s", format="%.0f"),
    "energy_per_token_j": st.column_config.NumberColumn("J/token", format="%.3f"),
    "usd_per_1m_tokens": st.column_config.NumberColumn("$ / 1M tokens", format="%.2f")})
missing = [c for c in ("ttft_p90_ms", "ttft_p99_ms", "itl_p90_ms", "itl_p99_ms")
           if rows[c].isna().all()]
if missing:
    st.caption("Not in these runs' files: " + ", ".join(missing) + " (empty columns).")
st.caption("$ per 1M output tokens = the catalog's list price per GPU-hour x GPUs / output "
           "tokens per hour at the run's throughput; empty where the catalog states no price.")
if len(pd.unique(rows["source"])) > 1:
    st.caption("Sources: " + ", ".join(sorted(map(str, pd.unique(rows["source"])))) + ".")
export.render()
