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
