"""Coverage: do the demand envelopes cover as often as they promise?"""

import streamlit as st
from analytics.config import BIN_CHOICES_S, DemandTarget
from analytics.ui import cache, charts, scenario, widgets
from analytics.ui.export import Export

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Coverage")

name, info = widgets.chosen_dataset()
synthetic = bool(info["synthetic"])
bin_label = widgets.intraday_bin(info, "coverage_bin", "envelopes")
params = widgets.envelope_controls("coverage")
target = cache.targets(name)[0]
if target != "weighted_tokens":
    st.caption(f"Target: **{DemandTarget(target).label}** per bin (this trace has no tokens).")
try:
    with st.spinner("Fitting point models and conformal intervals ..."):
        env = cache.demand_envelope(name, BIN_CHOICES_S[bin_label], params, target=target)
except ValueError as exc:
    st.error(f"No envelope for this grid: {widgets.plain(exc)}")
    st.stop()

out = Export("Coverage", [name])
out.param(dataset=name, bin=bin_label, target=target, alpha=params.alpha,
          horizon_bins=params.horizon, base_model=params.base_model,
          split=env.split.get("mode"))
st.caption(f"Dataset **{widgets.plain(name)}**, test window {env.split['test']['start']} to "
           f"{env.split['test']['end']} ({env.split['test']['bins']:,} bins). Coverage is "
           "measured on bins the intervals never saw.")
out.chart(charts.coverage_chart(env.interval_metrics, params.alpha, synthetic),
          key="coverage_chart", title="Coverage and width per interval method")
out.keep(env.interval_metrics, "interval_metrics", "Interval methods on the test window")
table = env.interval_metrics.assign(method=lambda d: d["method"].map(
    lambda m: charts.METHOD_LABELS.get(m, m)))
unit = DemandTarget(target).label
st.dataframe(table.rename(columns={"mean_width": "mean width", "winkler": "interval score",
                                   "infinite_bins": "infinite intervals"}),
             hide_index=True, column_config={
                 "coverage": st.column_config.NumberColumn(format="percent"),
                 "mean width": st.column_config.NumberColumn(
                     help=f"{unit} per bin, finite intervals only", format="%.0f"),
                 "interval score": st.column_config.NumberColumn(
                     help="Winkler score: width + 2/alpha x miss distance (lower is better)",
                     format="%.0f")},
             key="interval_table")
counts = [c for c in env.repairs.columns if c.startswith("repaired") or c == "point_outside_band"]
repaired = env.repairs[env.repairs[counts].sum(axis=1) > 0]
with st.expander(f"Repairs: demand is never negative ({len(repaired)} models or methods "
                 "repaired)"):
    st.caption("Point forecasts below 0 are clipped to 0 (the residual methods are calibrated "
               "on the clipped model), crossed bounds are sorted, bounds are clipped at 0 and a "
               "band is widened to its point when the point lies outside; coverage is measured "
               "on the repaired band. Counts per test window (models: whole series).")
    out.table(env.repairs, "repairs_table", "Repairs", hide_index=True)
out.chart(charts.rolling_coverage_chart(env.rolling.dropna(subset=["coverage"]),
                                       params.alpha, synthetic), key="rolling_chart",
          title="Rolling coverage")
st.caption("Rolling coverage is over the trailing day, or a quarter of the test window when "
           "that is shorter than a day; the curve starts once that much has passed.")
out.chart(charts.hourly_coverage_chart(env.hourly, synthetic), key="hourly_chart",
          title="Coverage by hour of day")

st.subheader("Coverage by regime (hour block x forecast tercile)")
pivot = env.by_regime.pivot(index="regime", columns="method", values="coverage")
out.table(pivot.rename(columns=charts.METHOD_LABELS), "regime_table", "Coverage by regime")

st.subheader("Shift alarm")
alarm = env.alarm
out.chart(charts.alarm_chart(alarm, synthetic), key="alarm_chart", title="Shift alarm")
if alarm["first_alarm"] is None:
    st.success(f"No alarm: the martingale stayed below {alarm['threshold']:.0f} "
               f"(level {1 / alarm['threshold']:.0%}); no evidence the coverage promise breaks.")
else:
    when = str(alarm["ts"][alarm["first_alarm"]])[:16].replace("T", " ")
    st.warning(f"Alarm at {when} UTC: the residuals stopped looking "
               "exchangeable (martingale above "
               f"{alarm['threshold']:.0f}), so split-conformal coverage is no longer promised; "
               "adaptive methods (rolling, ACI) are built for this case.")

st.subheader("Cold start / cross-trace shift")
others = [n for n in cache.dataset_names(cache.DEMAND_KINDS) if n != name]
if not others:
    st.caption("Add a second demand dataset to fit on one trace and calibrate on the first "
               "hours of this one.")
else:
    spans = [(cache.dataset_info(o) or {}) for o in others]  # longest first: most likely to fit
    spans = [(i["ts_max"] - i["ts_min"]).total_seconds() if i.get("ts_min") is not None
             and i.get("ts_max") is not None else 0.0 for i in spans]
    source = st.selectbox("fit the model on", others, key="cold_source",
                          index=max(range(len(others)), key=spans.__getitem__),
                          help="defaults to the longest other demand trace")
    try:
        with st.spinner("Fitting on the source trace ..."):
            cold = cache.cold_start(source, name, BIN_CHOICES_S[bin_label], (6, 12, 24, 48),
                                    params.alpha)
    except ValueError as exc:
        st.info(f"No cold-start run: {widgets.plain(exc)}")
    else:
        src_synth = bool((cache.dataset_info(source) or {}).get("synthetic"))
        out.datasets.append(source)
        out.param(cold_start_source=source)
        out.chart(charts.cold_start_chart(cold, params.alpha, source, name,
                                          synthetic or src_synth), key="cold_chart",
                  title="Cold start / cross-trace shift")
        out.table(cold, "cold_table", "Cold start", hide_index=True, column_config={
            "coverage": st.column_config.NumberColumn(format="%.3f"),
            "mean_width": st.column_config.NumberColumn("mean width", format="%.1f")})
        st.caption("Each trace is scaled by its own mean known at forecast time (the source's, "
                   "and the target's first k hours), so traces in different units (tokens vs "
                   "GPU-seconds) can be compared; widths are in the target's unit.")
out.render()
