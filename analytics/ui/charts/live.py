"""The Live page's chart: a run's demand against the band each bin was judged by."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from analytics.ui.charts.base import line


def live_chart(bins: pd.DataFrame, model: str, alpha: float, bin_label: str) -> go.Figure:
    """Demand (weighted tokens per bin) of the stored live bins against their conformal band
    and point forecast, bins above the band marked, alarm bins shaded, and the newest bin
    ringed.

    Parameters
    ----------
    bins : stored live bins (``ts``, ``demand``, ``point``, ``lower``, ``upper``, ``above``,
        ``alarm``; :func:`analytics.store.live_bins`), time order
    """
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=bins["ts"], y=bins["upper"], mode="lines", line={"width": 0},
                             showlegend=False, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=bins["ts"], y=bins["lower"], mode="lines", line={"width": 0},
                             fill="tonexty", fillcolor="rgba(31,119,180,0.25)",
                             name=f"{1 - alpha:.0%} band (ACI)"))
    fig.add_trace(line(bins["ts"], bins["point"], mode="lines", name="forecast",
                       line={"width": 1, "color": "#d62728"}))
    fig.add_trace(line(bins["ts"], bins["demand"], mode="lines+markers", name="demand",
                       line={"width": 1, "color": "#333"}, marker={"size": 3}))
    above = bins[bins["above"].fillna(False).astype(bool)]
    fig.add_trace(go.Scatter(x=above["ts"], y=above["demand"], mode="markers",
                             name="above the band", marker={"color": "#d62728", "size": 7}))
    step = bins["ts"].diff().median() if len(bins) > 1 else pd.Timedelta(minutes=5)
    for ts in bins.loc[bins["alarm"].fillna(False).astype(bool), "ts"]:
        fig.add_vrect(x0=ts, x1=ts + step, fillcolor="rgba(214,39,40,0.15)", line_width=0)
    if len(bins):
        newest = bins.iloc[-1]
        fig.add_trace(go.Scatter(x=[newest["ts"]], y=[newest["demand"]], mode="markers",
                                 name="newest bin", marker={"size": 14, "color": "rgba(0,0,0,0)",
                                                            "line": {"width": 2,
                                                                     "color": "#2ca02c"}}))
    fig.update_layout(title=f"{model} - live demand and its {1 - alpha:.0%} envelope per "
                            f"{bin_label}", height=440,
                      yaxis_title=f"weighted tokens / {bin_label}", xaxis_title="time (UTC)",
                      margin={"l": 60, "r": 20, "t": 60, "b": 40},
                      legend={"orientation": "h", "y": -0.2})
    return fig
