"""Shared chart helpers: the synthetic-data label every chart carries when its data is
generated."""

from __future__ import annotations

import plotly.graph_objects as go

SYNTHETIC_LABEL = "SYNTHETIC DATA (demo, not measured)"


def label_synthetic(fig: go.Figure, synthetic: bool) -> go.Figure:
    """Add a large diagonal "SYNTHETIC DATA" watermark to ``fig`` when ``synthetic``; returns
    the same figure."""
    if synthetic:
        fig.add_annotation(text=SYNTHETIC_LABEL, xref="paper", yref="paper", x=0.5, y=0.5,
                           showarrow=False, font={"size": 28, "color": "rgba(200,0,0,0.25)"},
                           textangle=-20)
    return fig
