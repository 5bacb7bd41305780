"""DataFrame -> Plotly figure. No data access here: callers pass frames in.

Long series use ``Scattergl``. A synthetic dataset is labelled on the figure itself (title and a
watermark) so a screenshot can never pass it off as measured traffic.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

SYNTHETIC_LABEL = "SYNTHETIC DATA (demo, not measured)"


def _label_synthetic(fig: go.Figure, synthetic: bool) -> go.Figure:
    if synthetic:
        fig.add_annotation(text=SYNTHETIC_LABEL, xref="paper", yref="paper", x=0.5, y=0.5,
                           showarrow=False, font={"size": 28, "color": "rgba(200,0,0,0.25)"},
                           textangle=-20)
    return fig


def demand_chart(grid: pd.DataFrame, title: str, bin_label: str, synthetic: bool = False,
                 target_label: str = "weighted tokens") -> go.Figure:
    """Demand grid as two stacked panels: target per bin, and requests per bin when known.

    Parameters
    ----------
    grid : frame with ``ts``, ``target`` and optionally ``requests`` (all-empty = not known)
    title : dataset name
    bin_label : e.g. ``"5min"``, shown in the axis titles
    synthetic : label the figure as synthetic
    """
    has_requests = "requests" in grid and grid["requests"].notna().any()
    rows = 2 if has_requests else 1
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    fig.add_trace(
        go.Scattergl(x=grid["ts"], y=grid["target"], mode="lines", name=target_label,
                     line={"width": 1, "color": "#1f77b4"}),
        row=1, col=1,
    )
    fig.update_yaxes(title_text=f"{target_label} / {bin_label}", row=1, col=1)
    if has_requests:
        fig.add_trace(
            go.Scattergl(x=grid["ts"], y=grid["requests"], mode="lines", name="requests",
                         line={"width": 1, "color": "#ff7f0e"}),
            row=2, col=1,
        )
        fig.update_yaxes(title_text=f"requests / {bin_label}", row=2, col=1)
    full_title = f"{title} - demand per {bin_label}"
    if synthetic:
        full_title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=full_title, height=520 if has_requests else 360,
                      margin={"l": 60, "r": 20, "t": 60, "b": 40}, showlegend=False)
    fig.update_xaxes(title_text="time (UTC)", row=rows, col=1)
    return _label_synthetic(fig, synthetic)


PART_COLORS = {"calibration": "rgba(255,165,0,0.10)", "test": "rgba(46,139,87,0.10)"}
METHOD_LABELS = {"direct_quantile": "direct quantile", "split": "split conformal",
                 "cqr": "CQR", "rolling": "rolling conformal", "aci": "ACI",
                 "regime": "regime (Mondrian)"}


def envelope_chart(series: pd.DataFrame, test: pd.DataFrame, model: str, method: str,
                   alpha: float, title: str, bin_label: str, synthetic: bool = False,
                   target_label: str = "weighted tokens") -> go.Figure:
    """Actual demand, a model's forecast, and one method's interval band on the test window,
    with the calibration and test windows shaded.

    Parameters
    ----------
    series : ``EnvelopeResult.series`` (ts, y, part, one column per model)
    test : ``EnvelopeResult.test`` (ts, ``<method>_lo``, ``<method>_hi``)
    """
    test = test.replace([np.inf, -np.inf], np.nan)  # infinite ACI bounds are not drawn
    fig = go.Figure()
    for part, color in PART_COLORS.items():
        rows = series[series["part"] == part]
        if len(rows):
            fig.add_vrect(x0=rows["ts"].iloc[0], x1=rows["ts"].iloc[-1], fillcolor=color,
                          line_width=0, annotation_text=part, annotation_position="top left")
    fig.add_trace(go.Scatter(x=test["ts"], y=test[f"{method}_hi"], mode="lines",
                             line={"width": 0}, showlegend=False, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=test["ts"], y=test[f"{method}_lo"], mode="lines",
                             line={"width": 0}, fill="tonexty",
                             fillcolor="rgba(31,119,180,0.25)",
                             name=f"{METHOD_LABELS.get(method, method)} {1 - alpha:.0%} band"))
    fig.add_trace(go.Scattergl(x=series["ts"], y=series["y"], mode="lines", name="actual",
                               line={"width": 1, "color": "#333"}))
    shown = series[series["part"] != "fit"]
    fig.add_trace(go.Scattergl(x=shown["ts"], y=shown[model], mode="lines",
                               name=f"forecast ({model})", line={"width": 1, "color": "#d62728"}))
    full_title = f"{title} - actual, forecast and {1 - alpha:.0%} envelope per {bin_label}"
    if synthetic:
        full_title += f" - {SYNTHETIC_LABEL}"
    cal = series[series["part"] == "calibration"]
    if len(cal):  # open on calibration + test, where the envelope lives; zoom out to see all
        fig.update_xaxes(range=[cal["ts"].iloc[0], series["ts"].iloc[-1]])
    fig.update_layout(title=full_title, height=460, yaxis_title=f"{target_label} / {bin_label}",
                      xaxis_title="time (UTC)", margin={"l": 60, "r": 20, "t": 60, "b": 40},
                      legend={"orientation": "h", "y": -0.2})
    return _label_synthetic(fig, synthetic)


def coverage_chart(metrics: pd.DataFrame, alpha: float, synthetic: bool = False) -> go.Figure:
    """Empirical coverage per interval method against the nominal ``1 - alpha`` line."""
    labels = [METHOD_LABELS.get(m, m) for m in metrics["method"]]
    fig = go.Figure(go.Bar(x=labels, y=metrics["coverage"], name="empirical coverage",
                           text=[f"{c:.1%}" for c in metrics["coverage"]], textposition="outside"))
    fig.add_hline(y=1 - alpha, line_dash="dash", line_color="#d62728",
                  annotation_text=f"nominal {1 - alpha:.0%}")
    title = "Coverage on the test window: nominal vs empirical"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, yaxis={"range": [0, 1.08], "tickformat": ".0%",
                                          "title": "coverage"}, height=380,
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return _label_synthetic(fig, synthetic)


def rolling_coverage_chart(rolling: pd.DataFrame, alpha: float, synthetic: bool = False
                           ) -> go.Figure:
    """Trailing one-day coverage per method over the test window."""
    fig = go.Figure()
    for method, rows in rolling.groupby("method", sort=False):
        fig.add_trace(go.Scattergl(x=rows["ts"], y=rows["coverage"], mode="lines",
                                   name=METHOD_LABELS.get(method, method)))
    fig.add_hline(y=1 - alpha, line_dash="dash", line_color="#d62728")
    title = "Rolling one-day coverage"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, yaxis={"tickformat": ".0%", "title": "coverage"},
                      xaxis_title="time (UTC)", height=360,
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return _label_synthetic(fig, synthetic)


def hourly_coverage_chart(hourly: pd.DataFrame, synthetic: bool = False) -> go.Figure:
    """Coverage per hour of day (columns) and method (rows) as a heat strip."""
    pivot = hourly.pivot(index="method", columns="hour", values="coverage")
    fig = go.Figure(go.Heatmap(
        z=pivot.to_numpy(), x=[f"{h:02d}" for h in pivot.columns],
        y=[METHOD_LABELS.get(m, m) for m in pivot.index], zmin=0.5, zmax=1.0,
        colorscale="RdYlGn", colorbar={"title": "coverage", "tickformat": ".0%"},
        text=[[f"{v:.0%}" for v in row] for row in pivot.to_numpy()], texttemplate="%{text}",
    ))
    title = "Coverage by hour of day (UTC)"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, height=320, xaxis={"title": "hour", "type": "category"},
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return _label_synthetic(fig, synthetic)


def alarm_chart(alarm: dict, synthetic: bool = False) -> go.Figure:
    """Exchangeability test martingale (log scale) with its rejection threshold."""
    fig = go.Figure(go.Scattergl(x=alarm["ts"], y=alarm["martingale"], mode="lines",
                                 name="test martingale"))
    fig.add_hline(y=alarm["threshold"], line_dash="dash", line_color="#d62728",
                  annotation_text=f"alarm at {alarm['threshold']:.0f}")
    start = alarm["ts"][alarm["test_start"]]
    fig.add_vline(x=start, line_dash="dot", line_color="#555")
    # plotly cannot place a vline annotation on a datetime axis itself: add it separately
    fig.add_annotation(x=start, y=1, yref="paper", text="test window starts", showarrow=False,
                       xanchor="left", yanchor="top")
    title = "Shift alarm: exchangeability martingale on calibration + test residuals"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, yaxis={"type": "log", "title": "martingale value",
                                          "exponentformat": "power"},
                      xaxis_title="time (UTC)", height=340,
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return _label_synthetic(fig, synthetic)


def cold_start_chart(table: pd.DataFrame, alpha: float, source: str, target: str,
                     synthetic: bool = False) -> go.Figure:
    """Coverage on the target after k calibration hours, one line per method."""
    labels = {"source_calibrated": "split, calibrated on the source only",
              "split": "split, calibrated on the target's first k h", "aci": "ACI from k h"}
    fig = go.Figure()
    for method, rows in table.groupby("method", sort=False):
        fig.add_trace(go.Scatter(x=rows["k_hours"], y=rows["coverage"], mode="lines+markers",
                                 name=labels.get(method, method)))
    fig.add_hline(y=1 - alpha, line_dash="dash", line_color="#d62728",
                  annotation_text=f"nominal {1 - alpha:.0%}")
    title = f"Cold start: fit on {source}, calibrate on the first k hours of {target}"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, xaxis_title="k (hours of target data)",
                      yaxis={"tickformat": ".0%", "title": "coverage on the rest"}, height=360,
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return _label_synthetic(fig, synthetic)


def capacity_chart(frame: pd.DataFrame, factor: float | None, unit: str, bin_label: str,
                   synthetic: bool = False) -> go.Figure:
    """Demand vs provisioned capacity (f x envelope upper bound), violations marked."""
    fig = go.Figure()
    test = frame[frame["part"] == "test"]
    if len(test):
        fig.add_vrect(x0=test["ts"].iloc[0], x1=test["ts"].iloc[-1],
                      fillcolor=PART_COLORS["test"], line_width=0, annotation_text="test",
                      annotation_position="top left")
    fig.add_trace(go.Scattergl(x=frame["ts"], y=frame["capacity"], mode="lines",
                               name=f"capacity = {factor} x upper bound",
                               line={"width": 1, "color": "#2ca02c"}))
    fig.add_trace(go.Scattergl(x=frame["ts"], y=frame["y"], mode="lines", name="demand",
                               line={"width": 1, "color": "#333"}))
    bad = frame[frame["violated"]]
    fig.add_trace(go.Scattergl(x=bad["ts"], y=bad["y"], mode="markers", name="SLO violation",
                               marker={"color": "#d62728", "size": 7, "symbol": "x"}))
    title = "Provisioned capacity vs demand (calibration + test)"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, height=420, yaxis_title=f"{unit} / {bin_label}",
                      xaxis_title="time (UTC)", legend={"orientation": "h", "y": -0.2},
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return _label_synthetic(fig, synthetic)


def overbooking_chart(curve: pd.DataFrame, target: float, factor: float | None,
                      synthetic: bool = False) -> go.Figure:
    """Overbooking factor -> bin-level violation rate on calibration and test."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=curve["factor"], y=curve["violation"], mode="lines",
                             name="calibration"))
    fig.add_trace(go.Scatter(x=curve["factor"], y=curve["test_violation"], mode="lines",
                             name="test"))
    fig.add_hline(y=target, line_dash="dash", line_color="#d62728",
                  annotation_text=f"target {target:.0%}")
    if factor is not None:
        fig.add_vline(x=factor, line_dash="dot", line_color="#555",
                      annotation_text=f"chosen f = {factor:.2f}")
    title = "Overbooking factor vs SLO violations"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, height=360, xaxis_title="overbooking factor f",
                      yaxis={"tickformat": ".0%", "title": "bins over capacity"},
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return _label_synthetic(fig, synthetic)


def mix_chart(mix: pd.DataFrame, synthetic: bool = False) -> go.Figure:
    """GPU counts per kind per hour (stacked) with hourly cost and power on a second axis."""
    kinds = [c for c in mix.columns
             if c not in ("hour", "capacity", "cost_usd", "power_kw", "kgco2")]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for k in kinds:
        fig.add_trace(go.Scatter(x=mix["hour"], y=mix[k], stackgroup="gpus", name=k,
                                 mode="lines"), secondary_y=False)
    fig.add_trace(go.Scatter(x=mix["hour"], y=mix["power_kw"], name="power (kW)",
                             line={"dash": "dot", "color": "#555"}), secondary_y=True)
    title = "GPU mix per hour"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, height=380, margin={"l": 60, "r": 60, "t": 60, "b": 40},
                      legend={"orientation": "h", "y": -0.2})
    fig.update_yaxes(title_text="GPUs", secondary_y=False, rangemode="tozero")
    fig.update_yaxes(title_text="power (kW)", secondary_y=True, rangemode="tozero")
    return _label_synthetic(fig, synthetic)


def dispatch_share_chart(shares: pd.DataFrame, policy: str, synthetic: bool = False
                         ) -> go.Figure:
    """Share of each hour's demand per site under one policy (stacked area)."""
    rows = shares[shares["policy"] == policy]
    total = rows.groupby("hour")["units"].transform("sum").replace(0, np.nan)
    fig = go.Figure()
    for site, r in rows.assign(share=rows["units"] / total).groupby("site", sort=False):
        fig.add_trace(go.Scatter(x=r["hour"], y=r["share"], stackgroup="s", name=site,
                                 mode="lines"))
    title = f"Dispatched share per site ({policy.replace('_', '-')})"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, height=340, yaxis={"tickformat": ".0%", "title": "share"},
                      xaxis_title="hour (UTC)", margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return _label_synthetic(fig, synthetic)


def carbon_lines_chart(shares: pd.DataFrame, synthetic: bool = False) -> go.Figure:
    """Carbon intensity per site over the dispatch hours (aligned to the trace)."""
    rows = shares[shares["policy"] == "home"]
    fig = go.Figure()
    for site, r in rows.groupby("site", sort=False):
        fig.add_trace(go.Scatter(x=r["hour"], y=r["gco2_per_kwh"], name=site, mode="lines"))
    title = "Carbon intensity per site (gCO2/kWh)"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, height=320, yaxis_title="gCO2/kWh", xaxis_title="hour (UTC)",
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return _label_synthetic(fig, synthetic)


def policy_bars(totals: pd.DataFrame, synthetic: bool = False) -> go.Figure:
    """tCO2e (and cost where every site has prices) per policy."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("tCO2e", "electricity cost (USD)"))
    fig.add_trace(go.Bar(x=totals["policy"], y=totals["tco2e"], name="tCO2e",
                         text=[f"{v:.4g}" for v in totals["tco2e"]], textposition="outside"),
                  row=1, col=1)
    if totals["usd"].notna().all():
        fig.add_trace(go.Bar(x=totals["policy"], y=totals["usd"], name="USD",
                             text=[f"{v:,.2f}" for v in totals["usd"]], textposition="outside"),
                      row=1, col=2)
    else:
        fig.add_annotation(text="no price series for every site:<br>cost not compared",
                           xref="paper", yref="paper", x=0.78, y=0.5, showarrow=False)
    title = "Baselines vs carbon-aware dispatch"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, height=340, showlegend=False,
                      margin={"l": 60, "r": 20, "t": 80, "b": 40})
    return _label_synthetic(fig, synthetic)


def pue_chart(temp_c: np.ndarray, pue_values: np.ndarray) -> go.Figure:
    """PUE of the chiller model against outside temperature."""
    fig = go.Figure(go.Scatter(x=temp_c, y=pue_values, mode="lines", name="PUE"))
    fig.update_layout(title="PUE vs outside temperature (SustainDC chiller COP model)",
                      height=300, xaxis_title="outside dry-bulb temperature (degC)",
                      yaxis_title="PUE", margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return fig


def telemetry_chart(frame: pd.DataFrame, metric: str, window: tuple | None = None,
                    title: str = "") -> go.Figure:
    """A telemetry metric over time, one line per (host, GPU), the serving window shaded."""
    fig = go.Figure()
    for (host, gpu), g in frame.groupby(["host", "gpu_id"]):
        fig.add_trace(go.Scattergl(x=g["ts"], y=g[metric], mode="lines+markers",
                                   name=f"{host} GPU {gpu}", marker={"size": 3}))
    if window is not None:
        fig.add_vrect(x0=window[0], x1=window[1], fillcolor="rgba(46,139,87,0.12)",
                      line_width=0, annotation_text="serving window",
                      annotation_position="top left")
    fig.update_layout(title=title or metric, height=340, xaxis_title="time (UTC)",
                      yaxis_title=metric, margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return fig


def power_cdf_chart(frame: pd.DataFrame, refs: pd.DataFrame) -> go.Figure:
    """CDF of per-GPU power in the dataset against reference clusters (AcmeTrace)."""
    fig = go.Figure()
    v = np.sort(frame["power_w"].dropna().to_numpy())
    if v.size:
        fig.add_trace(go.Scatter(x=v, y=np.arange(1, v.size + 1) / v.size * 100, mode="lines",
                                 name="this dataset", line={"width": 3}))
    for (src, cluster), r in refs[refs["metric"] == "gpu_power_watts"].groupby(
            ["source", "cluster"]):
        fig.add_trace(go.Scatter(x=r["value"], y=r["cdf_percent"], mode="lines",
                                 name=f"{src} {cluster}", line={"dash": "dot"}))
    fig.update_layout(title="Per-GPU power distribution vs reference clusters", height=340,
                      xaxis_title="power (W)", yaxis_title="CDF (%)",
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return fig


# --------------------------------------------------------------------------- launch advisor
def _arm_label(r) -> str:
    return f"{r['hardware']} x{int(r['tp'])} {r['precision']}"


def advisor_arms_chart(scored: pd.DataFrame, top: int = 12) -> go.Figure:
    """Ranked arms: q50 throughput bars with calibrated q10-q90 error bars; up to ``top`` ranked
    arms, then (greyed) the best abstaining and infeasible ones for contrast."""
    ranked = scored[scored["rank"].notna()].sort_values("rank").head(top)
    rest = scored[scored["rank"].isna()].head(max(0, top - len(ranked)) or 4)
    df = pd.concat([ranked, rest])
    status = np.where(df["rank"].notna(), "ranked",
                      np.where(~df["feasible"], "infeasible",
                               np.where(df["abstain"], "abstain", "no price")))
    colors = {"ranked": "#1f77b4", "abstain": "#ff7f0e", "infeasible": "#bbbbbb",
              "no price": "#9467bd"}
    fig = go.Figure()
    for st_name in ("ranked", "abstain", "no price", "infeasible"):
        sel = df[status == st_name]
        if sel.empty:
            continue
        q50 = sel["throughput_tok_s_q50"]
        fig.add_trace(go.Bar(
            y=[("#" + str(int(r)) + " " if r == r else "") + _arm_label(row)
               for r, (_, row) in zip(sel["rank"], sel.iterrows(), strict=True)],
            x=q50, orientation="h", name=st_name, marker_color=colors[st_name],
            error_x={"type": "data", "symmetric": False,
                     "array": sel["throughput_tok_s_q90"] - q50,
                     "arrayminus": q50 - sel["throughput_tok_s_q10"]},
            hovertext=[(row["abstain_axis"] or row["why_infeasible"] or
                        f"utility ${row['utility']:.2f}") for _, row in sel.iterrows()]))
    fig.update_layout(title="Arms: output throughput q50 with calibrated q10-q90",
                      xaxis_title="output tokens/s (all GPUs of the arm)",
                      yaxis={"autorange": "reversed"}, height=120 + 28 * len(df),
                      margin={"l": 10, "r": 10, "t": 50, "b": 40}, barmode="overlay")
    return fig


def backtest_chart(bt: dict) -> go.Figure:
    """Top-1 accuracy and mean regret per policy (two panels)."""
    pol = pd.DataFrame(bt["policies"]).T.reset_index(names="policy")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("top-1 accuracy", "mean regret"))
    fig.add_trace(go.Bar(x=pol["policy"], y=pol["top1"], name="top-1"), row=1, col=1)
    fig.add_trace(go.Bar(x=pol["policy"], y=pol["regret"], name="regret"), row=1, col=2)
    fig.update_layout(showlegend=False, height=380,
                      title=f"Leakage-free backtest over {bt['cells']} held-out workload cells")
    return fig


def calibration_chart(metrics: dict) -> go.Figure:
    """Per target: coverage of raw quantiles, random-fold offset, held-out-cell offset vs the
    nominal level."""
    rows = [{"target": t, "kind": k, "coverage": m["coverage"][k]}
            for t, m in metrics.items() if m.get("fitted")
            for k in ("raw", "random_fold", "held_out_cell")]
    df = pd.DataFrame(rows)
    fig = go.Figure()
    for k in ("raw", "random_fold", "held_out_cell"):
        sel = df[df["kind"] == k]
        fig.add_trace(go.Bar(x=sel["target"], y=sel["coverage"], name=k.replace("_", " ")))
    nominal = next(m["coverage"]["nominal"] for m in metrics.values() if m.get("fitted"))
    fig.add_hline(y=nominal, line_dash="dash", annotation_text=f"nominal {nominal:.0%}")
    fig.update_layout(barmode="group", yaxis={"range": [0, 1], "title": "coverage on held-out "
                                                                         "cells"},
                      title="Interval coverage on unseen workload cells", height=380)
    return fig


def launch_priors_chart(pri: pd.DataFrame) -> go.Figure:
    """Raw vs shrunk launch-success rate per GPU count, with the posterior interval."""
    fig = go.Figure()
    for kind, g in pri.groupby("gpu_kind"):
        x = [f"{kind} x{n}" for n in g["n_gpus"]]
        fig.add_trace(go.Scatter(x=x, y=g["raw_rate"], mode="markers", name=f"{kind} raw",
                                 marker={"symbol": "x", "size": 10},
                                 text=[f"{s}/{n}" for s, n in zip(g["successes"], g["trials"],
                                                                  strict=True)]))
        fig.add_trace(go.Scatter(
            x=x, y=g["posterior_mean"], mode="markers", name=f"{kind} shrunk",
            error_y={"type": "data", "symmetric": False, "array": g["hi"] - g["posterior_mean"],
                     "arrayminus": g["posterior_mean"] - g["lo"]}))
    fig.add_hline(y=float(pri["prior_mean"].iloc[0]), line_dash="dot",
                  annotation_text="pooled prior mean")
    fig.update_layout(title="Launch-success prior per configuration (beta-binomial shrinkage)",
                      yaxis={"range": [0, 1], "title": "P(launch succeeds)"}, height=380)
    return fig


# --------------------------------------------------------------------------- serving (Festina)
def serving_energy_chart(table: pd.DataFrame, rows: list[str], title: str,
                         synthetic: bool = False) -> go.Figure:
    """Energy normalised to Festina (bars) and TTFT / TBT attainment (markers, right axis).

    ``table``: :meth:`analytics.serving.engine.Comparison.table` output; ``rows``: policies to show.
    """
    t = table.set_index("policy").loc[rows]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=rows, y=t["energy_vs_festina"], name="energy / Festina",
                         text=[f"{v:.2f}x<br>{e:.3f} kWh" for v, e in
                               zip(t["energy_vs_festina"], t["energy_kwh"], strict=True)],
                         textposition="outside", marker_color="#1f77b4"))
    for col, name, color in (("ttft_attainment", "TTFT attainment", "#ff7f0e"),
                             ("tbt_attainment", "TBT attainment", "#2ca02c")):
        fig.add_trace(go.Scatter(x=rows, y=100 * t[col], name=name, mode="markers+lines",
                                 marker={"size": 10, "color": color}), secondary_y=True)
    fig.update_yaxes(title_text="energy normalised to Festina", secondary_y=False)
    fig.update_yaxes(title_text="SLO attainment (%)", secondary_y=True)
    fig.update_layout(title=title + (" - SYNTHETIC" if synthetic else ""), height=420,
                      legend={"orientation": "h", "y": -0.2})
    return _label_synthetic(fig, synthetic)


def serving_timeseries_chart(ts: pd.DataFrame, policies: list[str],
                             synthetic: bool = False) -> go.Figure:
    """GPU clock, GPUs powered on, power (per policy) and the arrival rate over time."""
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        subplot_titles=("mean SM clock of powered-on GPUs (MHz)", "GPUs on",
                                        "power (kW)", "arrivals (req/s)"))
    for p in policies:
        g = ts[ts["policy"] == p]
        for row, col in ((1, "clock_mhz"), (2, "gpus_on"), (3, "power_kw")):
            fig.add_trace(go.Scattergl(x=g["t_min"], y=g[col], mode="lines", name=p,
                                       legendgroup=p, showlegend=row == 1), row=row, col=1)
    g = ts[ts["policy"] == policies[0]]
    fig.add_trace(go.Scattergl(x=g["t_min"], y=g["arrivals_per_s"], mode="lines",
                               name="arrivals", line={"color": "black"}), row=4, col=1)
    fig.update_xaxes(title_text="minutes from the first request", row=4, col=1)
    fig.update_layout(height=720, title="Clock, GPUs on, power and arrival rate"
                      + (" - SYNTHETIC" if synthetic else ""))
    return _label_synthetic(fig, synthetic)


def serving_cdf_chart(cdf: pd.DataFrame, slo_ms: float, metric: str,
                      synthetic: bool = False) -> go.Figure:
    """Per-model latency CDF (``model``, ``quantile``, ``value`` ms) with the SLO line."""
    fig = go.Figure()
    for m, g in cdf.groupby("model"):
        fig.add_trace(go.Scatter(x=g["value"], y=g["quantile"], mode="lines", name=str(m)))
    fig.add_vline(x=slo_ms, line_dash="dash", annotation_text="SLO")
    fig.update_layout(title=f"Festina: per-model {metric} CDF"
                      + (" - SYNTHETIC" if synthetic else ""),
                      xaxis={"title": f"{metric} (ms)", "type": "log"},
                      yaxis={"title": "fraction of requests"}, height=420)
    return _label_synthetic(fig, synthetic)


def serving_profile_chart(curves: pd.DataFrame) -> go.Figure:
    """Energy per token vs SM clock, one panel per phase, one line per model (DVFS model or
    measured profile; normalised to each line's minimum so the U shapes compare)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("prefill", "decode"))
    for col, phase in ((1, "prefill"), (2, "decode")):
        for m, g in curves[curves["phase"] == phase].groupby("model"):
            y = g["energy_j_per_token"] / g["energy_j_per_token"].min()
            fig.add_trace(go.Scatter(x=g["clock_mhz"], y=y, mode="lines", name=str(m),
                                     legendgroup=str(m), showlegend=col == 1), row=1, col=col)
        fig.update_xaxes(title_text="SM clock (MHz)", row=1, col=col)
    fig.update_yaxes(title_text="energy per token / its minimum", row=1, col=1)
    fig.update_layout(title="Profile viewer: energy per token vs clock (U-shaped)", height=420)
    return fig


def serving_sensitivity_chart(sens: pd.DataFrame, synthetic: bool = False) -> go.Figure:
    """Festina's energy saving vs max-clock (%) against the SM power exponent gamma, one line per
    static floor; the calibrated gamma of each floor is a star, SLO deltas are in the hover.

    Parameters
    ----------
    sens : frame from :func:`analytics.serving.engine.sensitivity`
    synthetic : label the figure as synthetic
    """
    fig = go.Figure()
    for (sc, idle), g in sens.groupby(["static_scale", "idle_w"]):
        g = g.sort_values("gamma")
        fig.add_trace(go.Scatter(
            x=g["gamma"], y=100 * g["saving"], mode="lines+markers",
            name=f"static {idle:.0f} W (x{sc:g})",
            marker={"symbol": ["star" if c else "circle" for c in g["calibrated"]],
                    "size": [14 if c else 7 for c in g["calibrated"]]},
            customdata=np.column_stack([g["ttft_pp"], g["tbt_pp"]]),
            hovertemplate="gamma %{x:.2f}: saving %{y:.1f} %<br>TTFT %{customdata[0]:+.2f} pp, "
                          "TBT %{customdata[1]:+.2f} pp<extra></extra>"))
    title = "Festina saving vs max-clock by SM power exponent (star = calibrated)"
    fig.update_layout(title=title + (f" - {SYNTHETIC_LABEL}" if synthetic else ""), height=380,
                      xaxis_title="gamma (SM dynamic power ~ f^gamma)",
                      yaxis_title="energy saving vs max-clock (%)")
    return _label_synthetic(fig, synthetic)


# --- Power: hybrid batch + inference co-simulation (analytics.power) --------------------------

_POWER_COLORS = {"total": "#222222", "batch": "#1f77b4", "inference": "#d62728"}


def power_timeseries_chart(frame: pd.DataFrame, title: str, synthetic: bool = False) -> go.Figure:
    """Total, batch and inference power per minute (kW) of one scenario.

    Parameters
    ----------
    frame : scenario frame with ``ts``, ``total_power_w``, ``batch_power_w``,
        ``inference_power_w``
    title : scenario description
    synthetic : label the figure as synthetic
    """
    fig = go.Figure()
    for col, name in (("total_power_w", "total"), ("batch_power_w", "batch"),
                      ("inference_power_w", "inference")):
        fig.add_trace(go.Scattergl(x=frame["ts"], y=frame[col] / 1000.0, mode="lines", name=name,
                                   line={"width": 1.4 if name == "total" else 1,
                                         "color": _POWER_COLORS[name]}))
    full = f"Power per minute - {title}" + (f" - {SYNTHETIC_LABEL}" if synthetic else "")
    fig.update_layout(title=full, height=380, yaxis_title="power (kW)", xaxis_title="time",
                      margin={"l": 60, "r": 20, "t": 60, "b": 40},
                      legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right",
                              "yanchor": "bottom"})
    return _label_synthetic(fig, synthetic)


def power_sweep_chart(table: pd.DataFrame, share: float | None = None,
                      utilization: float | None = None, synthetic: bool = False) -> go.Figure:
    """CV of total power and median ramps vs inference share, one line per utilisation.

    Parameters
    ----------
    table : sweep rows with ``utilization``, ``inference_share``, ``cv``, ``ramp_1min``,
        ``ramp_5min``, ``ramp_15min``
    share, utilization : the scenario shown above the chart (marked on the curves)
    synthetic : label the figure as synthetic
    """
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "coefficient of variation of total power", "median |change| of normalised power"))
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]
    dashes = {"ramp_15min": "solid", "ramp_5min": "dash", "ramp_1min": "dot"}
    for i, (u, g) in enumerate(table.sort_values("inference_share").groupby("utilization")):
        color = palette[i % len(palette)]
        fig.add_trace(go.Scatter(x=g["inference_share"], y=g["cv"], mode="lines+markers",
                                 name=f"CV, U={u:g}", line={"color": color}), row=1, col=1)
        for col, dash in dashes.items():
            fig.add_trace(go.Scatter(x=g["inference_share"], y=g[col], mode="lines+markers",
                                     name=f"{col.split('_')[1]} ramp, U={u:g}",
                                     line={"color": color, "dash": dash}), row=1, col=2)
    if share is not None:
        for c in (1, 2):
            fig.add_vline(x=share, line={"color": "grey", "dash": "dot"}, row=1, col=c)
        if utilization is not None:
            mine = table[(table["utilization"] - utilization).abs() < 1e-9]
            if not mine.empty:
                near = mine.iloc[(mine["inference_share"] - share).abs().argsort()[:1]]
                fig.add_trace(go.Scatter(
                    x=near["inference_share"], y=near["cv"], mode="markers",
                    name=f"this scenario (share {share:g})",
                    marker={"size": 14, "symbol": "circle-open", "color": "black"}),
                    row=1, col=1)
    fig.update_xaxes(title_text="inference share of offered GPU-time", range=[-0.03, 1.03])
    fig.update_yaxes(title_text="CV", row=1, col=1)
    fig.update_yaxes(title_text="fraction of mean power", row=1, col=2)
    title = "Inference-share sweep (GPU count and utilisation fixed)"
    fig.update_layout(title=title + (f" - {SYNTHETIC_LABEL}" if synthetic else ""), height=430,
                      margin={"l": 60, "r": 20, "t": 80, "b": 40})
    return _label_synthetic(fig, synthetic)


def power_daily_chart(profile: pd.DataFrame, synthetic: bool = False) -> go.Figure:
    """Mean power by hour of day, each component relative to its own mean.

    Parameters
    ----------
    profile : ``hour``, ``total``, ``batch``, ``inference`` (see
        :func:`analytics.power.daily_profile`)
    """
    fig = go.Figure()
    for name in ("total", "batch", "inference"):
        if profile[name].notna().any():
            fig.add_trace(go.Scatter(x=profile["hour"], y=profile[name], mode="lines+markers",
                                     name=name, line={"color": _POWER_COLORS[name]}))
    fig.add_hline(y=1.0, line={"color": "grey", "dash": "dot"})
    title = "Daily profile: mean power by hour / component mean"
    fig.update_layout(title=title + (f" - {SYNTHETIC_LABEL}" if synthetic else ""), height=340,
                      xaxis={"title": "hour of day", "dtick": 3}, yaxis_title="relative power",
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return _label_synthetic(fig, synthetic)
