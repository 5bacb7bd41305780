"""Shared chart helpers: the synthetic-data label every chart carries when its data is
generated, and the line trace of a time series (SVG or WebGL by length)."""

from __future__ import annotations

import plotly.graph_objects as go

SYNTHETIC_LABEL = "SYNTHETIC DATA (demo, not measured)"


def label_synthetic(fig: go.Figure, synthetic: bool) -> go.Figure:
    """Add a large diagonal "SYNTHETIC DATA" watermark to ``fig`` when ``synthetic``, and
    :data:`SYNTHETIC_LABEL` to its title where the title lacks it; returns the same figure."""
    if synthetic and not any(a.text == SYNTHETIC_LABEL for a in fig.layout.annotations):
        title = fig.layout.title.text or ""
        if SYNTHETIC_LABEL not in title:
            fig.update_layout(title_text=f"{title} - {SYNTHETIC_LABEL}" if title
                              else SYNTHETIC_LABEL)
        fig.add_annotation(text=SYNTHETIC_LABEL, xref="paper", yref="paper", x=0.5, y=0.5,
                           showarrow=False, font={"size": 28, "color": "rgba(200,0,0,0.25)"},
                           textangle=-20)
    return fig


#: Points from which a line is drawn with WebGL (``Scattergl``); shorter ones are SVG
#: (``Scatter``): a browser without a GPU renders WebGL in software, which cost the first chart
#: of a 2,016-bin week about 1.3 s in headless Chromium (``bench/bench_first_chart.py``).
WEBGL_FROM_POINTS = 5000


def line(x, y, **kwargs) -> go.Scatter | go.Scattergl:
    """A line / marker trace of ``x`` against ``y``: ``Scattergl`` from
    :data:`WEBGL_FROM_POINTS` points, else ``Scatter`` (same keyword arguments)."""
    kind = go.Scattergl if len(x) >= WEBGL_FROM_POINTS else go.Scatter
    return kind(x=x, y=y, **kwargs)
