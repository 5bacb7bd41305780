"""Telemetry charts: live / stored GPU series with a serving window, power CDFs against
AcmeTrace references."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analytics.telemetry import gpu_labels
from analytics.ui.charts.base import line

#: Human labels with units for the telemetry columns (issue 31 item 8: the axis said power_w).
METRIC_LABELS = {"power_w": "power (W)", "sm_active": "SM active (share of time)",
                 "gpu_util_pct": "GPU utilisation (%)", "mem_used_mib": "memory used (MiB)",
                 "temp_c": "temperature (\u00b0C)", "sm_clock_mhz": "SM clock (MHz)",
                 "mem_clock_mhz": "memory clock (MHz)", "energy_j": "energy counter (J)"}


def telemetry_chart(frame: pd.DataFrame, metric: str, window: tuple | None = None,
                    title: str = "") -> go.Figure:
    """A telemetry metric over time, one line per GPU = (host, index, UUID), named
    ``host/index`` (with the UUID where host and index repeat), the serving window shaded."""
    fig = go.Figure()
    labelled = frame.assign(_gpu=gpu_labels(frame)) if not frame.empty else frame.assign(_gpu=[])
    for label, g in labelled.sort_values("ts").groupby("_gpu", sort=True):
        fig.add_trace(line(g["ts"], g[metric], mode="lines+markers",
                                   name=str(label), marker={"size": 3}))
    if window is not None:
        fig.add_vrect(x0=window[0], x1=window[1], fillcolor="rgba(46,139,87,0.12)",
                      line_width=0, annotation_text="serving window",
                      annotation_position="top left")
    fig.update_layout(title=title or METRIC_LABELS.get(metric, metric), height=340,
                      xaxis_title="time (UTC)", yaxis_title=METRIC_LABELS.get(metric, metric),
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
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
