"""DataFrame -> Plotly figure. No data access here: callers pass frames in.

Long series use ``Scattergl``. A synthetic dataset is labelled on the figure itself (title and a
watermark) so a screenshot can never pass it off as measured traffic.
"""

from __future__ import annotations

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
