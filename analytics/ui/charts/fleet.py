"""Fleet plan charts (issue 30): replicas over time against the certified demand, and the
planned replicas per UTC hour of day."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analytics.ui.charts.base import label_synthetic, line
from analytics.ui.charts.demand import PART_COLORS


def replicas_chart(frame: pd.DataFrame, arm: str, bin_label: str,
                   synthetic: bool = False) -> go.Figure:
    """Output-token demand and the provisioned (certified) demand per bin on the left axis,
    the planned replicas as a step line on the right; short bins marked.

    ``frame``: :attr:`analytics.decisions.fleet_plan.FleetPlan.frame`."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    test = frame[frame["part"] == "test"]
    if len(test):
        fig.add_vrect(x0=test["ts"].iloc[0], x1=test["ts"].iloc[-1],
                      fillcolor=PART_COLORS["test"], line_width=0, annotation_text="test",
                      annotation_position="top left")
    fig.add_trace(line(frame["ts"], frame["provisioned"], mode="lines",
                       name="certified demand (f x upper bound)",
                       line={"width": 1, "color": "#2ca02c"}), secondary_y=False)
    fig.add_trace(line(frame["ts"], frame["demand"], mode="lines", name="demand",
                       line={"width": 1, "color": "#333"}), secondary_y=False)
    short = frame[frame["shortfall"]]
    fig.add_trace(line(short["ts"], short["demand"], mode="markers", name="short bin",
                       marker={"color": "#d62728", "size": 7, "symbol": "x"}),
                  secondary_y=False)
    fig.add_trace(go.Scatter(x=frame["ts"], y=frame["replicas"], mode="lines",
                             line={"shape": "hv", "width": 2, "color": "#1f77b4"},
                             name=f"replicas ({arm})"), secondary_y=True)
    fig.update_layout(title="Planned replicas against the certified demand", height=440,
                      xaxis_title="time (UTC)", legend={"orientation": "h", "y": -0.2},
                      margin={"l": 60, "r": 60, "t": 60, "b": 40})
    fig.update_yaxes(title_text=f"output tokens / {bin_label}", secondary_y=False)
    fig.update_yaxes(title_text="replicas", secondary_y=True, rangemode="tozero",
                     tickformat=",d", showgrid=False)
    return label_synthetic(fig, synthetic)


def hourly_replicas_chart(hourly: list[int], synthetic: bool = False) -> go.Figure:
    """Planned replicas per UTC hour of day (what the KEDA cron triggers carry)."""
    fig = go.Figure(go.Bar(x=list(range(24)), y=hourly, marker_color="#1f77b4",
                           name="replicas"))
    fig.update_layout(title="Planned replicas by hour of day (UTC)", height=300,
                      xaxis_title="hour of day (UTC)", yaxis_title="replicas",
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return label_synthetic(fig, synthetic)
