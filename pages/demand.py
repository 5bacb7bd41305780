"""Demand: the complete demand grid of the chosen dataset."""

import streamlit as st
from analytics.config import BIN_CHOICES_S, DemandTarget, bin_choices, envelope_bin_choices
from analytics.ui import cache, charts, scenario, widgets
from analytics.ui.export import Export

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Demand")

name, info = widgets.chosen_dataset()

st.caption(f"Dataset **{widgets.plain(name)}** - {info['format']}, {int(info['rows']):,} rows, "
           f"{info['ts_min']} to {info['ts_max']} (UTC)")
if info["format"] in ("burstgpt", "burstgpt_minute", "burstgpt_daily", "mooncake"):
    st.caption("Timestamps in this trace are relative to its first day; the dates shown start "
               "at the chosen t0, so **weekdays are relative** (hour of day is real).")

is_requests = info["kind"] == "requests"
res = float(info["resolution_s"] or 0)
targets = cache.targets(name)
if len(targets) > 1:
    target = st.radio("Demand target", targets, horizontal=True, key="target", persist_state="session",
                      format_func=lambda t: DemandTarget(t).label)
else:
    target = targets[0]
    if target == "gpu_seconds":
        st.caption("This trace has no token counts: the demand target is **GPU-seconds** "
                   "(execution time summed per bin).")
target_label = DemandTarget(target).label
span_s = (info["ts_max"] - info["ts_min"]).total_seconds()
choices = bin_choices(res, span_s, not is_requests)
calibrates = envelope_bin_choices(choices, span_s)  # bins with enough calibration bins
c1, c2, c3, c4 = st.columns(4)
bin_label = widgets.shared_bin(choices, "bin", c1, preferred=calibrates)
if bin_label not in calibrates:
    st.caption(f"At {bin_label} this {span_s / 3600:,.1f}-hour dataset has too few bins for "
               "an envelope" + (f"; {', '.join(calibrates)} can calibrate one." if calibrates
                                else "."))
if is_requests and target == "weighted_tokens":
    w_p = c2.number_input("w_prompt", 0.0, 100.0, 1.0, 0.1, key="w_prompt", persist_state="session",
                          help="weight of a prompt (prefill) token in the target")
    w_c = c3.number_input("w_completion", 0.0, 100.0, 1.0, 0.1, key="w_completion", persist_state="session",
                          help="weight of a completion (decode) token in the target")
    with_failed = c4.checkbox("include failed requests", True, key="with_failed", persist_state="session")
elif is_requests:
    w_p, w_c = 1.0, 1.0
    with_failed = c4.checkbox("include failed requests", True, key="with_failed", persist_state="session")
else:
    w_p, w_c, with_failed = 1.0, 1.0, True
    st.caption("Pre-binned series carry total tokens only: prompt/completion weights do not "
               "apply.")

try:
    grid = cache.demand_grid(name, BIN_CHOICES_S[bin_label], w_p, w_c, with_failed, target)
except ValueError as exc:
    st.error(str(exc))
    widgets.stop()

out = Export("Demand", [name])
out.param(dataset=name, bin=bin_label, target=target, w_prompt=w_p, w_completion=w_c,
          include_failed=with_failed)
summary = cache.grid_summary(grid)
if summary.get("note"):
    st.warning(summary["note"])
m1, m2, m3, m4 = st.columns(4)
m1.metric("bins", f"{summary['bins']:,}")
m2.metric("empty bins", f"{summary['zero_bins']:,}")
m3.metric(f"mean {target_label} / {bin_label}", f"{summary['mean_target']:,.0f}")
if grid["requests"].notna().any():
    m4.metric("requests", f"{int(grid['requests'].sum()):,}")
else:
    m4.metric("requests", "not in data")
    st.caption("This dataset has no request counts (e.g. the BurstGPT per-minute aggregate).")

out.chart(charts.demand_chart(grid, name, bin_label, bool(info["synthetic"]), target_label),
          key="demand_chart", title=f"Demand per {bin_label}")
out.keep(grid, "demand_grid", f"Demand grid ({bin_label} bins)")

st.header("Forecast and demand envelope")
params = widgets.envelope_controls("demand")
try:
    with st.spinner("Fitting point models and conformal intervals ..."):
        env = cache.demand_envelope(name, BIN_CHOICES_S[bin_label], params, w_p, w_c,
                                    with_failed, target)
except ValueError as exc:
    st.error(f"No envelope for this grid: {widgets.plain(exc)}")
    out.note(f"No envelope for this grid: {exc}")
    out.render()
    widgets.stop()
base_model = env.params.base_model  # "auto" resolved: the model the intervals wrap
out.param(alpha=params.alpha, horizon_bins=params.horizon, base_model=base_model,
          split=env.split.get("mode"))
if env.base_choice is not None:
    st.caption("Point model under the intervals, chosen for this dataset: "
               + widgets.plain(env.base_choice["reason"]) + ".")

models = env.point_metrics["model"].tolist()
methods = env.interval_metrics["method"].tolist()
c1, c2 = st.columns(2)
model = c1.selectbox("forecast shown", models, index=models.index(base_model),
                     key="shown_model", persist_state="session")
method = c2.selectbox("envelope shown", methods, index=methods.index("aci"),
                      format_func=lambda m: charts.METHOD_LABELS.get(m, m), key="shown_method",
                      persist_state="session")
out.chart(charts.envelope_chart(env.series, env.test, model, method, params.alpha, name,
                                bin_label, bool(info["synthetic"]), target_label),
          key="envelope_chart", title=f"Forecast {model} and envelope {method}")
out.keep(env.series, "envelope_series", "Forecasts and intervals per bin (every model, method)")
out.keep(env.interval_metrics, "interval_metrics", "Interval methods on the test window")
row = env.interval_metrics.set_index("method").loc[method]
k1, k2, k3 = st.columns(3)
k1.metric(f"{charts.METHOD_LABELS.get(method, method)} coverage", f"{row['coverage']:.1%}",
          f"{row['coverage'] - (1 - params.alpha):+.1%} vs nominal")
k2.metric("mean width", f"{row['mean_width']:,.0f}")
k3.metric("test window", f"{env.split['test']['bins']:,} bins")
st.caption(f"Split ({env.split['mode']}): fit {env.split['fit']['start']} to "
           f"{env.split['fit']['end']}, calibration to {env.split['calibration']['end']}, "
           f"test to {env.split['test']['end']} (UTC).")

st.subheader("Point models on the test window")
table = env.point_metrics.copy()
table["wape"] = table["wape"] * 100
out.table(table.rename(columns={"wape": "WAPE %", "mae": "MAE", "rmse": "RMSE"}),
          "model_table", "Point models on the test window", hide_index=True, column_config={
              "WAPE %": st.column_config.NumberColumn(format="%.2f"),
              "MAE": st.column_config.NumberColumn(format="%.1f"),
              "RMSE": st.column_config.NumberColumn(format="%.1f")})
if table["wape"].isna().any():
    st.caption(f"WAPE is empty where it is undefined: {cache.WAPE_UNDEFINED} (it divides by "
               "the demand); MAE and RMSE are given.")
g = env.mae_gain
st.markdown(
    f"MAE gain of **{g['model']}** over **{g['baseline']}**: **{g['mae_gain']:,.1f}** "
    f"{target_label}/bin, 95% moving-block bootstrap interval **{g['lo']:,.1f} - {g['hi']:,.1f}** "
    f"(blocks of {g['block_bins']} bins, the length chosen from the data by the Politis-White "
    f"rule (2004, with the 2009 correction) on the loss differential; {g.get('n_blocks', 0)} "
    f"whole blocks in the test window; {g['n_boot']} resamples)."
)
if g.get("warning"):
    st.caption(f"Warning: {g['warning']}.")
out.note(f"MAE gain of {g['model']} over {g['baseline']}: {g['mae_gain']:,.1f} {target_label}/bin, "
         f"95% moving-block bootstrap interval {g['lo']:,.1f} - {g['hi']:,.1f}.")
out.render()
