"""Serving charts (Festina paper): energy and SLO attainment per policy, time series, latency
CDFs, profile curves, sensitivity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analytics.ui.charts.base import SYNTHETIC_LABEL, label_synthetic, line


def serving_energy_chart(table: pd.DataFrame, rows: list[str], title: str,
                         synthetic: bool = False) -> go.Figure:
    """Energy normalised to Festina (bars) and TTFT / TBT attainment (markers, right axis).

    ``table``: :meth:`analytics.serving.Comparison.table` output; ``rows``: policies to show.
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
    fig.update_yaxes(title_text="SLO attainment (%)", secondary_y=True,
                     **attainment_axis(100 * pd.concat([t["ttft_attainment"],
                                                        t["tbt_attainment"]])))
    fig.update_layout(title=title, height=420,
                      legend={"orientation": "h", "y": -0.2})
    return label_synthetic(fig, synthetic)


def serving_timeseries_chart(ts: pd.DataFrame, policies: list[str],
                             synthetic: bool = False) -> go.Figure:
    """GPU clock, GPUs powered on, power (per policy) and the arrival rate over time."""
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        subplot_titles=("mean SM clock of powered-on GPUs (MHz)", "GPUs on",
                                        "power (kW)", "arrivals (req/s)"))
    for p in policies:
        g = ts[ts["policy"] == p]
        for row, col in ((1, "clock_mhz"), (2, "gpus_on"), (3, "power_kw")):
            fig.add_trace(line(g["t_min"], g[col], mode="lines", name=p,
                                       legendgroup=p, showlegend=row == 1), row=row, col=1)
    g = ts[ts["policy"] == policies[0]]
    fig.add_trace(line(g["t_min"], g["arrivals_per_s"], mode="lines",
                               name="arrivals", line={"color": "black"}), row=4, col=1)
    fig.update_xaxes(title_text="minutes from the first request", row=4, col=1)
    fig.update_layout(height=720, title="Clock, GPUs on, power and arrival rate")
    return label_synthetic(fig, synthetic)


def serving_cdf_chart(cdf: pd.DataFrame, slo_ms: float, metric: str,
                      synthetic: bool = False) -> go.Figure:
    """Per-model latency CDF (``model``, ``quantile``, ``value`` ms) with the SLO line."""
    fig = go.Figure()
    for m, g in cdf.groupby("model"):
        fig.add_trace(go.Scatter(x=g["value"], y=g["quantile"], mode="lines", name=str(m)))
    fig.add_vline(x=slo_ms, line_dash="dash", annotation_text="SLO")
    fig.update_layout(title=f"Festina: per-model {metric} CDF",
                      xaxis={"title": f"{metric} (ms)", "type": "log"},
                      yaxis={"title": "fraction of requests"}, height=420)
    return label_synthetic(fig, synthetic)


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
    sens : frame from :func:`analytics.serving.sensitivity`
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
    return label_synthetic(fig, synthetic)


def serving_prediction_chart(sweep: pd.DataFrame, synthetic: bool = False) -> go.Figure:
    """Festina's energy saving vs max-clock (bars, %) and its SLO attainment (markers, right
    axis, %) per output-length predictor; the measured mean prediction error is in the hover.

    Parameters
    ----------
    sweep : frame from :func:`analytics.serving.prediction_sweep`
    synthetic : label the figure as synthetic
    """
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=sweep["predictor"], y=sweep["energy_saving_pct"],
                         name="energy saving vs max-clock (%)",
                         customdata=sweep["mean_abs_error_pct"],
                         hovertemplate="%{x}: saving %{y:.2f} %<br>mean |error| "
                                       "%{customdata:.1f} %<extra></extra>"))
    fig.add_trace(go.Scatter(x=sweep["predictor"], y=sweep["slo_attainment_pct"],
                             mode="markers", marker={"size": 11, "symbol": "diamond"},
                             name="SLO attainment, both (%)",
                             hovertemplate="%{x}: SLO attainment %{y:.2f} %<extra></extra>"),
                  secondary_y=True)
    title = "Festina vs max-clock by output-length predictor"
    fig.update_layout(title=title + (f" - {SYNTHETIC_LABEL}" if synthetic else ""), height=380,
                      xaxis_title="output-length predictor (error level)")
    fig.update_yaxes(title_text="energy saving vs max-clock (%)", secondary_y=False)
    fig.update_yaxes(title_text="SLO attainment (%)", secondary_y=True,
                     **attainment_axis(sweep["slo_attainment_pct"]))
    return label_synthetic(fig, synthetic)


def attainment_axis(pct: pd.Series) -> dict:
    """Axis settings for SLO attainment in %: whole-percent ticks one apart over a range of at
    least 5 points ending just above 100 (issue 31 item 8: all-100 % runs drew the ticks
    "100, 100, 100", and a free axis 93.9 / 95.84 / 97.78)."""
    lo = float(pct.min()) if len(pct) and pd.notna(pct.min()) else 95.0
    lo = min(95.0, float(np.floor(lo - 1)))
    return {"range": [lo, 100.5], "tickformat": ".0f",
            "dtick": 1 if 100 - lo <= 10 else 5 if 100 - lo <= 50 else 10}
