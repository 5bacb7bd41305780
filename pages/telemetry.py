"""Telemetry: live NVML readings, uploaded nvidia-smi / DCGM feeds, serving-window averages."""

from datetime import timedelta

import pandas as pd
import streamlit as st
from analytics.config import GAP_STEPS
from analytics.ui import cache, charts, gpu_telemetry, scenario, widgets
from analytics.ui.export import Export

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Telemetry")

status = gpu_telemetry.nvml_status()
if status["available"]:
    st.success(f"NVML sees {len(status['gpus'])} GPU(s): {', '.join(status['gpus'])}")

    @st.fragment(run_every="3s")
    def live():
        try:
            frame = gpu_telemetry.sample_live(1.0, 250)
        except Exception as exc:  # the driver went away mid-session: say so, keep the page
            st.warning(f"Live sampling stopped: {widgets.plain(exc)}")
            return
        buf = pd.concat([st.session_state.get("live_buf", pd.DataFrame()), frame])
        st.session_state["live_buf"] = buf.tail(2000)
        st.plotly_chart(charts.telemetry_chart(st.session_state["live_buf"], "power_w",
                                               title="Live power (W), refreshed every 3 s"),
                        key="live_chart")

    live()
else:
    st.info(f"Live sampling is off on this host: {status['reason']}. Upload `nvidia-smi "
            "--query-gpu=... --format=csv` output or DCGM-exporter text on the Data page, or "
            "run `headroom telemetry sample` on a GPU host.")

ledger = cache.datasets()
names = ledger.loc[ledger["kind"] == "telemetry", "name"].tolist()
refs = gpu_telemetry.reference_cdfs()
if not names:
    st.caption("No telemetry dataset in the store yet.")
    if not refs.empty:
        st.plotly_chart(charts.power_cdf_chart(pd.DataFrame({"power_w": []}), refs),
                        key="cdf_chart")
    widgets.stop()

name = st.selectbox("Telemetry dataset", names, key="telemetry_dataset", persist_state="session")
rows = gpu_telemetry.telemetry_rows(name)
widgets.warn_synthetic(widgets.synthetic_among([name]), "telemetry")
metrics = [m for m in ("power_w", "sm_active", "gpu_util_pct", "mem_used_mib", "temp_c",
                       "sm_clock_mhz", "mem_clock_mhz") if rows[m].notna().any()]
metric = st.selectbox("Metric", metrics, key="telemetry_metric", persist_state="session",
                      format_func=lambda m: charts.METRIC_LABELS.get(m, m))

st.subheader("Serving window vs whole job")
try:
    guess = gpu_telemetry.serving_window(name)
except ValueError:
    guess = (rows["ts"].min(), rows["ts"].max())
# the samples' span, to the end of the last sample's period (a sample stands for the time
# after it, up to the next one)
first, last = rows["ts"].min().to_pydatetime(), gpu_telemetry.samples_end(name).to_pydatetime()


def _within(t0, t1) -> tuple:
    """A window clamped to the data's first and last sample."""
    a, b = max(pd.Timestamp(t0).to_pydatetime(), first), min(pd.Timestamp(t1).to_pydatetime(), last)
    return (a, b) if a <= b else (first, last)


vllm_result = st.file_uploader("vllm bench serve result (JSON) to take the window from",
                               type=["json"], key="vllm_result")
if vllm_result is not None and st.session_state.get("vllm_seen") != vllm_result.file_id:
    st.session_state["vllm_seen"] = vllm_result.file_id
    try:
        w0, w1 = gpu_telemetry.window_from_vllm_result(vllm_result.getvalue())
        st.session_state["win"] = _within(w0, w1)
        if st.session_state["win"] != (pd.Timestamp(w0).to_pydatetime(),
                                       pd.Timestamp(w1).to_pydatetime()):
            st.warning(f"The result's window {w0} to {w1} reaches beyond the samples "
                       f"({first} to {last}); it was cut to them.")
    except ValueError as exc:
        st.error(f"{widgets.plain(vllm_result.name)}: {widgets.plain(exc)}")
# the window starts at the guess; one kept from another dataset is cut to these samples
st.session_state["win"] = _within(*st.session_state.get("win", guess))
start, end = st.slider("serving window (UTC), within the samples", min_value=first,
                       max_value=last, step=timedelta(seconds=1),
                       format="YYYY-MM-DD HH:mm:ss", key="win", persist_state="session")
with st.expander("Freshness windows (s): samples older than this are down-weighted"):
    cols = st.columns(len(metrics))
    fresh = {m: cols[i].number_input(m, 0.1, 3600.0, float(gpu_telemetry.DEFAULT_FRESHNESS_S[m]),
                                     key=f"fresh_{m}",
                                     persist_state="session") for i, m in enumerate(metrics)}
st.caption("The window starts as the first to last sample above half the peak utilisation (or "
           "power); edit it, e.g. from a `vllm bench serve` result. Each sample counts for the "
           "time it stood for, fully within its freshness window and decaying after it.")
try:
    table = gpu_telemetry.window_averages(name, pd.Timestamp(start), pd.Timestamp(end), fresh)
except ValueError as exc:
    st.error(widgets.plain(exc))
    widgets.stop()
out = Export("Telemetry", [name])
out.param(dataset=name, metric=metric, window_start_utc=start, window_end_utc=end,
          **{f"freshness_{m}_s": v for m, v in fresh.items()})
out.chart(charts.telemetry_chart(rows, metric, (pd.Timestamp(start), pd.Timestamp(end)),
                                 title=f"{name}: {charts.METRIC_LABELS.get(metric, metric)}"),
          key="telemetry_chart",
          title=f"{metric} per GPU")
st.caption("One row per GPU and metric; a GPU is (host, index, UUID), so nodes that share GPU "
           "indices stay apart.")
out.table(table, "window_table", "Whole-job and serving-window averages per GPU",
          hide_index=True, column_config={
    "gpu_uuid": st.column_config.TextColumn("UUID"),
    "whole": st.column_config.NumberColumn("whole job", format="%.3f"),
    "window": st.column_config.NumberColumn("serving window", format="%.3f"),
    "window_minus_whole": st.column_config.NumberColumn("difference", format="%+.3f")})
st.subheader("Energy in the window, per GPU")
energy = gpu_telemetry.gpu_energy(name, pd.Timestamp(start), pd.Timestamp(end))
out.table(energy, "energy_table", "Energy in the window, per GPU", hide_index=True,
          column_config={
    "gpu_uuid": st.column_config.TextColumn("UUID"),
    "mean_power_w": st.column_config.NumberColumn("mean power (W)", format="%.1f"),
    "max_power_w": st.column_config.NumberColumn("max power (W)", format="%.1f"),
    "energy_counter_j": st.column_config.NumberColumn("energy, counter (J)", format="%.0f"),
    "counter_resets": st.column_config.NumberColumn("counter resets", format="%d"),
    "first_reset_ts": st.column_config.TextColumn("first reset (UTC)"),
    "energy_power_j": st.column_config.NumberColumn("energy, power x time (J)", format="%.0f"),
    "measured_s": st.column_config.NumberColumn("measured (s)", format="%.0f"),
    "gaps": st.column_config.NumberColumn("logging gaps", format="%d"),
    "gap_s": st.column_config.NumberColumn("gap time (s)", format="%.0f"),
    "first_gap_start": st.column_config.TextColumn("first gap from (UTC)"),
    "first_gap_end": st.column_config.TextColumn("first gap to (UTC)")})
resets = int(energy["counter_resets"].sum()) if not energy.empty else 0
if not energy.empty:  # issue 31 item 8: totals in human units, beside the per-GPU joules
    e1, e2, e3 = st.columns(3)
    by_power = energy["energy_power_j"].dropna()
    by_counter = energy["energy_counter_j"].dropna()
    e1.metric("energy, power x time, all GPUs", "n/a" if by_power.empty else
              widgets.energy_text(float(by_power.sum())))
    e2.metric("energy, counter, all GPUs", "n/a" if by_counter.empty else
              widgets.energy_text(float(by_counter.sum())))
    e3.metric("mean power, all GPUs", widgets.power_text(float(energy["mean_power_w"].sum())))
gap_s = float(energy["gap_s"].sum()) if not energy.empty else 0.0
if gap_s:
    first = energy.loc[energy["gaps"] > 0].iloc[0]
    st.warning(f"Logging gaps: {int(energy['gaps'].sum())} in this window, {gap_s:,.0f} s in all "
               f"(first {first['first_gap_start']} to {first['first_gap_end']} UTC, "
               f"{widgets.plain(first['gpu'])}). Power was not measured there: energy from power "
               "x time counts the measured spans only, and the gaps' energy is unknown (the "
               "counter, where the log has one, runs on through them).")
st.caption("Energy from the cumulative counter is the sum of reset-aware deltas: where the "
           "counter drops (driver reload, restart, wrap) the delta is the new reading, counted "
           "from 0, never negative"
           + (f"; {resets} reset(s) in this window." if resets else ".")
           + " Power x time integrates the power samples (trapezoid) over the measured spans, "
           "both window ends included; a step longer than "
           f"{GAP_STEPS:g} sampling intervals is a logging gap, not integrated.")
if "power_w" in metrics:
    out.chart(charts.power_cdf_chart(rows, refs), key="cdf_chart", title="Power CDF")
    if refs.empty:
        st.caption("Ingest AcmeTrace `acme_power_util_cdf.csv` to overlay reference clusters.")
out.render()
