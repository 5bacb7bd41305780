"""Decision charts: capacity vs demand, overbooking curve, GPU mix, dispatch shares, tCO2e
per policy, PUE (conformal demand envelopes paper, Sec. 5-6)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analytics.ui.charts.base import SYNTHETIC_LABEL, label_synthetic, line
from analytics.ui.charts.demand import PART_COLORS


def shade_test(fig: go.Figure, frame: pd.DataFrame) -> go.Figure:
    """Shade the test window of ``frame`` (rows with ``part`` == ``test``) on ``fig``,
    labelled; returns ``fig``."""
    test = frame[frame["part"] == "test"]
    if len(test):
        fig.add_vrect(x0=test["ts"].iloc[0], x1=test["ts"].iloc[-1],
                      fillcolor=PART_COLORS["test"], line_width=0, annotation_text="test",
                      annotation_position="top left")
    return fig


def capacity_chart(frame: pd.DataFrame, factor: float | None, unit: str, bin_label: str,
                   synthetic: bool = False) -> go.Figure:
    """Demand vs provisioned capacity (f x envelope upper bound), violations marked."""
    fig = shade_test(go.Figure(), frame)
    fig.add_trace(line(frame["ts"], frame["capacity"], mode="lines",
                               name=f"capacity = {factor} x upper bound",
                               line={"width": 1, "color": "#2ca02c"}))
    fig.add_trace(line(frame["ts"], frame["y"], mode="lines", name="demand",
                               line={"width": 1, "color": "#333"}))
    bad = frame[frame["violated"]]
    fig.add_trace(line(bad["ts"], bad["y"], mode="markers", name="SLO violation",
                               marker={"color": "#d62728", "size": 7, "symbol": "x"}))
    title = "Provisioned capacity vs demand (calibration + test)"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, height=420, yaxis_title=f"{unit} / {bin_label}",
                      xaxis_title="time (UTC)", legend={"orientation": "h", "y": -0.2},
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return label_synthetic(fig, synthetic)


def overbooking_chart(curve: pd.DataFrame, target: float, factor: float | None,
                      synthetic: bool = False) -> go.Figure:
    """The factor / violation trade-off: overbooking factor (x) -> bin-level violation rate
    (y) on calibration (empirical) and test, the Learn-then-Test upper confidence bound
    (``curve["ltt_bound"]``, :func:`analytics.decisions.capacity.ltt_bound`), the target, and
    the chosen factor (the smallest whose bound meets the target)."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=curve["factor"], y=curve["violation"], mode="lines",
                             name="calibration (empirical)"))
    fig.add_trace(go.Scatter(x=curve["factor"], y=curve["test_violation"], mode="lines",
                             name="test"))
    if "ltt_bound" in curve:
        fig.add_trace(go.Scatter(x=curve["factor"], y=curve["ltt_bound"], mode="lines",
                                 name="LTT bound (calibration)",
                                 line={"dash": "dash", "color": "#9467bd"}))
    fig.add_hline(y=target, line_dash="dash", line_color="#d62728",
                  annotation_text=f"target {target:.0%}")
    if factor is not None:
        fig.add_vline(x=factor, line_dash="dot", line_color="#555",
                      annotation_text=f"chosen f = {factor:.2f}")
        at = curve[np.isclose(curve["factor"], factor)]
        y = at["ltt_bound"] if "ltt_bound" in at else at["violation"]
        fig.add_trace(go.Scatter(x=at["factor"], y=y, mode="markers",
                                 name=f"chosen f = {factor:.2f}", marker={
                                     "size": 10, "color": "#555", "symbol": "diamond"}))
    title = "Overbooking factor vs SLO violations"
    if synthetic:
        title += f" - {SYNTHETIC_LABEL}"
    fig.update_layout(title=title, height=360, xaxis_title="overbooking factor f",
                      yaxis={"tickformat": ".0%", "title": "bins over capacity",
                             "rangemode": "tozero"},
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return label_synthetic(fig, synthetic)


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
    # issue 31 item 8: an hour axis (a one-hour trace has one period: a marker, hour ticks,
    # not a dot on a millisecond axis)
    fig.update_xaxes(title_text="hour (UTC)", tickformat="%b %d %H:%M", dtick=3_600_000
                     if len(mix) <= 48 else None)
    if len(mix) == 1:
        fig.update_traces(mode="markers", marker={"size": 12}, selector={"type": "scatter"})
    return label_synthetic(fig, synthetic)


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
    return label_synthetic(fig, synthetic)


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
    return label_synthetic(fig, synthetic)


def carbon_profile_chart(profile: pd.DataFrame) -> go.Figure:
    """Mean carbon intensity by hour of day (UTC) per site
    (:func:`analytics.services.decisions.site_carbon_profile`): measured site data, never
    synthetic."""
    fig = go.Figure()
    for site, r in profile.groupby("site", sort=False):
        fig.add_trace(go.Scatter(x=r["hour_utc"], y=r["gco2_per_kwh"], mode="lines+markers",
                                 name=f"{site} ({r['basis'].iloc[0]})"))
    fig.update_layout(title="Carbon intensity by hour of day, mean over each site's series",
                      height=300, yaxis_title="gCO2/kWh", xaxis_title="hour of day (UTC)",
                      xaxis={"dtick": 3}, margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return fig


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
    return label_synthetic(fig, synthetic)


def pue_chart(temp_c: np.ndarray, pue_values: np.ndarray) -> go.Figure:
    """PUE of the chiller model against outside temperature."""
    fig = go.Figure(go.Scatter(x=temp_c, y=pue_values, mode="lines", name="PUE"))
    fig.update_layout(title="PUE vs outside temperature (SustainDC chiller COP model)",
                      height=300, xaxis_title="outside dry-bulb temperature (degC)",
                      yaxis_title="PUE", margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return fig
