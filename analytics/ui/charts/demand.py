"""Demand and coverage charts: grids, envelopes, coverage by method, hour and day, the shift
alarm, cold start (conformal demand envelopes paper, Sec. 3-4)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analytics.ui.charts.base import SYNTHETIC_LABEL, label_synthetic, line


def demand_chart(grid: pd.DataFrame, title: str, bin_label: str, synthetic: bool = False,
                 target_label: str = "weighted tokens", height: int | None = None) -> go.Figure:
    """Demand grid as two stacked panels: target per bin, and requests per bin when known.

    Parameters
    ----------
    grid : frame with ``ts``, ``target`` and optionally ``requests`` (all-empty = not known)
    title : dataset name
    bin_label : e.g. ``"5min"``, shown in the axis titles
    synthetic : label the figure as synthetic
    height : figure height in px (default 520 with a requests panel, else 360)
    """
    has_requests = "requests" in grid and grid["requests"].notna().any()
    rows = 2 if has_requests else 1
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    fig.add_trace(
        line(grid["ts"], grid["target"], mode="lines", name=target_label,
                     line={"width": 1, "color": "#1f77b4"}),
        row=1, col=1,
    )
    fig.update_yaxes(title_text=f"{target_label} / {bin_label}", row=1, col=1)
    if has_requests:
        fig.add_trace(
            line(grid["ts"], grid["requests"], mode="lines", name="requests",
                         line={"width": 1, "color": "#ff7f0e"}),
            row=2, col=1,
        )
        fig.update_yaxes(title_text=f"requests / {bin_label}", row=2, col=1)
    full_title = f"{title} - demand per {bin_label}"
    if synthetic:
        full_title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=full_title, height=height or (520 if has_requests else 360),
                      margin={"l": 60, "r": 20, "t": 60, "b": 40}, showlegend=False)
    fig.update_xaxes(title_text="time (UTC)", row=rows, col=1)
    return label_synthetic(fig, synthetic)


PART_COLORS = {"calibration": "rgba(255,165,0,0.10)", "test": "rgba(46,139,87,0.10)"}
METHOD_LABELS = {"direct_quantile": "direct quantile", "split": "split conformal",
                 "cqr": "CQR", "rolling": "rolling conformal", "aci": "ACI",
                 "regime": "regime (Mondrian)"}


def _shade_parts(fig: go.Figure, series: pd.DataFrame) -> None:
    """Shade the calibration and test windows of ``series`` (``ts``, ``part``)."""
    for part, color in PART_COLORS.items():
        rows = series[series["part"] == part]
        if len(rows):
            fig.add_vrect(x0=rows["ts"].iloc[0], x1=rows["ts"].iloc[-1], fillcolor=color,
                          line_width=0, annotation_text=part, annotation_position="top left")


def split_chart(preview: pd.DataFrame, title: str, bin_label: str, synthetic: bool = False,
                target_label: str = "weighted tokens") -> go.Figure:
    """The demand the envelope is fitted, calibrated and tested on, drawn before any fit.

    Parameters
    ----------
    preview : :func:`analytics.envelope.pipeline.split_preview` (ts, y, part)
    """
    fig = go.Figure(line(preview["ts"], preview["y"], mode="lines", name="actual",
                                 line={"width": 1, "color": "#333"}))
    _shade_parts(fig, preview)
    full_title = f"{title} - demand per {bin_label}: fit, calibration and test windows"
    if synthetic:
        full_title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=full_title, height=260, yaxis_title=f"{target_label} / {bin_label}",
                      xaxis_title="time (UTC)", margin={"l": 60, "r": 20, "t": 50, "b": 40},
                      showlegend=False)
    return label_synthetic(fig, synthetic)


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
    _shade_parts(fig, series)
    fig.add_trace(go.Scatter(x=test["ts"], y=test[f"{method}_hi"], mode="lines",
                             line={"width": 0}, showlegend=False, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=test["ts"], y=test[f"{method}_lo"], mode="lines",
                             line={"width": 0}, fill="tonexty",
                             fillcolor="rgba(31,119,180,0.25)",
                             name=f"{METHOD_LABELS.get(method, method)} {1 - alpha:.0%} band"))
    fig.add_trace(line(series["ts"], series["y"], mode="lines", name="actual",
                               line={"width": 1, "color": "#333"}))
    shown = series[series["part"] != "fit"]
    fig.add_trace(line(shown["ts"], shown[model], mode="lines",
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
    return label_synthetic(fig, synthetic)


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
    return label_synthetic(fig, synthetic)


def rolling_coverage_chart(rolling: pd.DataFrame, alpha: float, synthetic: bool = False
                           ) -> go.Figure:
    """Trailing one-day coverage per method over the test window."""
    fig = go.Figure()
    for method, rows in rolling.groupby("method", sort=False):
        fig.add_trace(line(rows["ts"], rows["coverage"], mode="lines",
                                   name=METHOD_LABELS.get(method, method)))
    fig.add_hline(y=1 - alpha, line_dash="dash", line_color="#d62728")
    title = "Rolling one-day coverage"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, yaxis={"tickformat": ".0%", "title": "coverage"},
                      xaxis_title="time (UTC)", height=360,
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return label_synthetic(fig, synthetic)


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
    return label_synthetic(fig, synthetic)


def alarm_chart(alarm: dict, synthetic: bool = False) -> go.Figure:
    """Exchangeability test martingale (log scale) with its rejection threshold."""
    fig = go.Figure(line(alarm["ts"], alarm["martingale"], mode="lines",
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
    return label_synthetic(fig, synthetic)


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
    return label_synthetic(fig, synthetic)


def atlas_chart(rows: pd.DataFrame, synthetic: bool = False) -> go.Figure:
    """Envelope atlas heatmaps: coverage gap (pp, coverage minus target) by dataset x bin (rows)
    and interval method (columns), one panel per alpha; refused cells are blank and say so.

    Parameters
    ----------
    rows : the atlas rows (:data:`analytics.envelope.atlas.COLUMNS`)
    synthetic : label the figure as synthetic (a synthetic dataset among the rows)
    """
    from analytics.config import BIN_CHOICES_S

    label = {v: k for k, v in BIN_CHOICES_S.items()}
    frame = rows.assign(cell=[f"{d} @ {label.get(int(b), f'{int(b)} s')}" if pd.notna(b)
                              else f"{d} @ no bin"
                              for d, b in zip(rows["dataset"], rows["bin_s"], strict=True)])
    alphas = sorted(frame["alpha"].unique())
    methods = list(dict.fromkeys(frame["method"]))
    cells = list(dict.fromkeys(frame["cell"]))
    fig = make_subplots(rows=1, cols=len(alphas), shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=[f"alpha {a:g} (target {1 - a:.0%})" for a in alphas])
    span = float(np.nanmax(np.abs(frame["coverage_gap_pp"].to_numpy(float)), initial=1.0))
    for j, a in enumerate(alphas, start=1):
        sub = frame[frame["alpha"] == a]
        z = sub.pivot(index="cell", columns="method", values="coverage_gap_pp").reindex(
            index=cells, columns=methods).to_numpy(float)
        text = [["refused" if np.isnan(v) else f"{v:+.1f}" for v in row] for row in z]
        fig.add_trace(go.Heatmap(
            z=z, x=[METHOD_LABELS.get(m, m) for m in methods], y=cells, zmid=0.0,
            zmin=-span, zmax=span, colorscale="RdBu", showscale=j == len(alphas), text=text,
            texttemplate="%{text}", hovertemplate="%{y}<br>%{x}: %{text} pp<extra></extra>",
            colorbar={"title": "gap (pp)"}), row=1, col=j)
    title = "Coverage gap (coverage minus target, percentage points) per dataset x method"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, height=max(300, 60 + 34 * len(cells)),
                      margin={"l": 60, "r": 20, "t": 80, "b": 40})
    return label_synthetic(fig, synthetic)
