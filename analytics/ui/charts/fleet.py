"""Fleet plan charts (issue 30): replicas over time against the certified demand, and the
planned replicas per UTC hour of day."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analytics.ui.charts.base import label_synthetic, line
from analytics.ui.charts.decisions import shade_test


def replicas_chart(frame: pd.DataFrame, arm: str, bin_label: str,
                   synthetic: bool = False) -> go.Figure:
    """Output-token demand and the provisioned (certified) demand per bin on the left axis,
    the planned replicas as a step line on the right; short bins marked.

    ``frame``: :attr:`analytics.decisions.fleet_plan.FleetPlan.frame`."""
    fig = shade_test(make_subplots(specs=[[{"secondary_y": True}]]), frame)
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


#: The leaderboard's y axes: column -> label.
BOARD_AXES = {"energy_per_token_j": "J per output token",
              "usd_per_1m_tokens": "$ per 1M output tokens"}


def pareto_chart(board: pd.DataFrame, y: str, predicted: pd.DataFrame | None = None,
                 synthetic: bool = False) -> go.Figure:
    """Measured runs: output tokens/s per GPU (x) against ``y`` (:data:`BOARD_AXES`), one
    colour per GPU kind, the Pareto front joined; the advisor's ``predicted`` arms (q50 with
    calibrated q10-q90 bars on both axes, per GPU) drawn hollow, those that abstain as grey
    crosses.

    ``board``: :func:`analytics.services.fleet.leaderboard`; ``predicted``: scored arms with
    ``throughput_tok_s_q10/_q50/_q90``, ``energy_per_token_j_q10/_q50/_q90`` (or
    ``usd_per_1m_tokens_q*``), ``n_gpus``, ``abstain``."""
    fig = go.Figure()
    front = "pareto_energy" if y == "energy_per_token_j" else "pareto_usd"
    rows = board[board[y].notna()]
    for hw, g in rows.groupby("hardware", sort=True):
        fig.add_trace(go.Scatter(
            x=g["tok_s_per_gpu"], y=g[y], mode="markers", name=f"{hw} (measured)",
            marker={"size": 8},
            hovertext=[f"{r.model} TP{r.tp} {r.precision}, {r.concurrency:g} concurrent"
                       for r in g.itertuples()]))
    edge = rows[rows[front]].sort_values("tok_s_per_gpu")
    if len(edge):
        fig.add_trace(go.Scatter(x=edge["tok_s_per_gpu"], y=edge[y], mode="lines",
                                 name="Pareto front (measured)",
                                 line={"color": "#333", "dash": "dot"}))
    if predicted is not None and len(predicted):
        key = "energy_per_token_j" if y == "energy_per_token_j" else "usd_per_1m_tokens"
        for abstain, g in predicted.groupby("abstain"):
            gpus = g["n_gpus"].clip(lower=1).to_numpy(float)
            x50 = g["throughput_tok_s_q50"] / gpus
            y50 = g.get(f"{key}_q50")
            if y50 is None:  # the cost model fitted no such target: nothing to draw
                continue
            fig.add_trace(go.Scatter(
                x=x50, y=y50, mode="markers",
                name="predicted, outside measured support (abstains)" if abstain
                else "predicted (calibrated q10-q90)",
                marker={"symbol": "x" if abstain else "circle-open", "size": 10,
                        "color": "#999" if abstain else "#d62728"},
                error_x={"type": "data", "symmetric": False,
                         "array": g["throughput_tok_s_q90"] / gpus - x50,
                         "arrayminus": x50 - g["throughput_tok_s_q10"] / gpus},
                error_y={"type": "data", "symmetric": False,
                         "array": g[f"{key}_q90"] - y50, "arrayminus": y50 - g[f"{key}_q10"]},
                hovertext=[f"{r['hardware']} TP{int(r['tp'])} {r['precision']}"
                           for _, r in g.iterrows()]))
    fig.update_layout(title=f"Output tokens/s per GPU against {BOARD_AXES[y]}", height=480,
                      xaxis_title="output tokens/s per GPU", yaxis_title=BOARD_AXES[y],
                      yaxis_type="log", legend={"orientation": "h", "y": -0.2},
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return label_synthetic(fig, synthetic)
