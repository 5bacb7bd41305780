"""Coverage: do the demand envelopes cover as often as they promise?"""

import pandas as pd
import streamlit as st
from analytics.config import BIN_CHOICES_S, DemandTarget
from analytics.ui import cache, charts, scenario, widgets
from analytics.ui.export import Export
from analytics.ui.progress import Progress

scenario.through_app(__file__)  # a deep link on a fresh server goes through app.py

st.title("Coverage")


def atlas_section(out: Export) -> None:
    """The envelope atlas: every interval method on every demand dataset x bin x alpha, run on
    the sweep runner (stored, resumable), as a heatmap of the coverage gap and a table."""
    st.subheader("Envelope atlas: every dataset x bin x alpha")
    if Progress.cancelled("envelope_atlas"):
        st.session_state["atlas_on"] = False
        st.info("Atlas cancelled; the cells that finished are kept in the store and are read, "
                "not recomputed, when it runs again.")
    if not st.toggle("Compute the atlas", key="atlas_on", persist_state="session",
                     help="Coverage and mean width of every interval method for every demand "
                          "dataset, at each bin the dataset offers and each alpha. One task "
                          "per dataset x bin x alpha on a local process pool (or the operator's "
                          "Dask scheduler); finished cells are kept in the store."):
        st.caption("Off: the atlas fits one envelope per dataset x bin x alpha (minutes on "
                   "a large store; a rerun reads the stored cells).")
        return
    c1, c2 = st.columns(2)
    st.session_state.setdefault("atlas_alphas", list(cache.ATLAS_ALPHAS))
    alphas = c1.multiselect("alphas", [0.01, 0.05, 0.1, 0.2, 0.3], key="atlas_alphas",
                            persist_state="session",
                            format_func=lambda a: f"{a:g}")
    names = c2.multiselect("datasets (empty: every demand dataset)",
                           cache.dataset_names(cache.DEMAND_KINDS), key="atlas_datasets",
                           persist_state="session")
    if not alphas:
        st.info("Choose at least one alpha.")
        return
    bar = Progress("Envelope atlas (dataset x bin x alpha cells)", "envelope_atlas")
    try:
        doc = cache.envelope_atlas(tuple(alphas), (), tuple(names), progress=bar)
    except ValueError as exc:  # e.g. the operator's Dask scheduler does not answer
        bar.close()
        st.error(f"No atlas: {widgets.plain(exc)}")
        return
    bar.close()
    rows = pd.DataFrame(doc["rows"])
    synthetic = bool(doc["synthetic"])
    if synthetic:
        st.warning("SYNTHETIC data among the datasets: "
                   + ", ".join(widgets.plain(n) for n in doc["synthetic"]) + ".")
    out.param(atlas_alphas=", ".join(f"{a:g}" for a in doc["alphas"]))
    out.chart(charts.atlas_chart(rows, synthetic), key="atlas_chart",
              title="Envelope atlas: coverage gap by dataset x method per alpha")
    hits = pd.DataFrame([{"method": charts.METHOD_LABELS.get(m, m), **h}
                         for m, h in doc["hits"].items()])
    out.table(hits, "atlas_hits", "Atlas: cells at or above target coverage", hide_index=True,
              column_config={"mean_gap_pp": st.column_config.NumberColumn(
                  "mean gap (pp)", format="%+.1f"),
                  "hit_target": st.column_config.NumberColumn("at or above target")})
    out.table(rows, "atlas_rows", "Envelope atlas", hide_index=True, column_config={
        "coverage": st.column_config.NumberColumn(format="percent"),
        "target_coverage": st.column_config.NumberColumn("target", format="percent"),
        "coverage_gap_pp": st.column_config.NumberColumn("gap (pp)", format="%+.1f"),
        "mean_width": st.column_config.NumberColumn("mean width", format="%.0f",
                                                    help="target unit per bin")})
    run = doc["sweep_run"]
    st.caption(f"{run['tasks']} cells: {widgets.sweep_source(run, cpu=True)}. Gap = coverage "
               "minus 1 - alpha on each test window (negative: the method under-covers). A "
               "refused cell (too few bins for the split or for alpha) is kept with its reason. "
               "Widths are in each dataset's own target unit per bin.")

name, info = widgets.chosen_dataset()
synthetic = bool(info["synthetic"])
bin_label = widgets.intraday_bin(info, "coverage_bin", "envelopes")
params = widgets.envelope_controls("coverage")
target = cache.targets(name)[0]
if target != "weighted_tokens":
    st.caption(f"Target: **{DemandTarget(target).label}** per bin (this trace has no tokens).")
try:  # first, the windows the envelope will be fitted, calibrated and tested on (no fit)
    preview = cache.split_preview(name, BIN_CHOICES_S[bin_label], params, target=target)
    st.plotly_chart(charts.split_chart(preview, name, bin_label, synthetic,
                                       DemandTarget(target).label), key="split_chart")
except ValueError:
    pass  # the envelope below says why there is none
try:
    with st.spinner("Fitting point models and conformal intervals ..."):
        env = cache.demand_envelope(name, BIN_CHOICES_S[bin_label], params, target=target)
except ValueError as exc:
    st.error(f"No envelope for this grid: {widgets.plain(exc)}")
    atlas_out = Export("Coverage", [])
    atlas_section(atlas_out)
    atlas_out.render()
    widgets.stop()

out = Export("Coverage", [name])
out.param(dataset=name, bin=bin_label, target=target, alpha=params.alpha,
          horizon_bins=params.horizon, base_model=env.params.base_model,
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
for flag in widgets.under_coverage(env.interval_metrics, params.alpha,
                                   int(env.split["test"]["bins"])):
    st.warning(widgets.plain(flag))
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
pivot = pivot.rename(columns=charts.METHOD_LABELS)
bins = env.by_regime.groupby("regime")["bins"].max()
regime_table = pivot.assign(bins=bins.reindex(pivot.index).astype(int))
out.table(regime_table, "regime_table", "Coverage by regime", column_config={
    **{m: st.column_config.NumberColumn(format="percent") for m in pivot.columns},
    "bins": st.column_config.NumberColumn("test bins", format="%d",
                                          help="test bins in the regime (the coverage's base)")})
st.caption(f"Coverage per regime in % of its test bins (nominal {1 - params.alpha:.0%}); a "
           "regime with few bins measures coverage loosely.")

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
    # issue 31 item 9: the best other trace first (dense tokens before a sparse or GPU-seconds
    # one, then the longest), not the longest span, which was a trace that cannot work
    others = [n for n in cache.demand_order() if n != name]
    source = st.selectbox("fit the model on", others, key="cold_source", persist_state="session",
                          help="defaults to the best other demand trace: dense token traces "
                               "first, then the longest")
    cold = None
    if not st.toggle("Run the cold-start experiment", key="cold_on", persist_state="session",
                     help="Fits the point model on the source trace, then calibrates on the "
                          "first 6, 12, 24 and 48 hours of this one."):
        st.caption("Off: it fits a model on the source trace (seconds to minutes on a busy "
                   "host), so it runs when asked.")
    else:
        try:
            with st.spinner("Fitting on the source trace ..."):
                cold = cache.cold_start(source, name, BIN_CHOICES_S[bin_label],
                                        (6, 12, 24, 48), params.alpha)
        except ValueError as exc:
            st.info(f"No cold-start run: {widgets.plain(exc)}")
    if cold is not None:
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
atlas_section(out)
out.render()
