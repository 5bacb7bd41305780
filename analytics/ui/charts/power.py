"""Power charts (hybrid power paper): per-minute power, the inference-share sweep, the daily
profile."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analytics.ui.charts.base import SYNTHETIC_LABEL, label_synthetic

_POWER_COLORS = {"total": "#222222", "batch": "#1f77b4", "inference": "#d62728"}


#: Most points per series the power-over-time chart draws; longer runs are resampled.
MAX_POWER_POINTS = 800


def power_bucket_min(n_minutes: int, max_points: int = MAX_POWER_POINTS) -> int:
    """Bucket width (minutes) that draws at most ``max_points`` per series: 1 for short runs,
    else the first of 5, 15, 30, 60, 120, 240 or 1440 minutes that fits.

    >>> power_bucket_min(1440), power_bucket_min(7 * 1440), power_bucket_min(30 * 1440)
    (5, 15, 60)
    """
    if n_minutes <= max_points:
        return 1
    return next((b for b in (5, 15, 30, 60, 120, 240) if n_minutes / b <= max_points), 1440)


def power_timeseries_chart(frame: pd.DataFrame, title: str, synthetic: bool = False) -> go.Figure:
    """Total, batch and inference power (kW) of one scenario, readable at any length.

    A run longer than :data:`MAX_POWER_POINTS` minutes is drawn as bucket means
    (:func:`power_bucket_min`) with the per-minute minimum-maximum of total power as a shaded
    band, so ramps inside a bucket stay visible; a range slider under the x axis zooms in. The
    per-minute series is in the page's downloads.

    Parameters
    ----------
    frame : scenario frame with ``ts``, ``total_power_w``, ``batch_power_w``,
        ``inference_power_w`` (one row per minute)
    title : scenario description
    synthetic : label the figure as synthetic
    """
    bucket = power_bucket_min(len(frame))
    cols = ["total_power_w", "batch_power_w", "inference_power_w"]
    kw = frame.set_index("ts")[cols] / 1000.0
    if bucket > 1:
        grouped = kw.resample(f"{bucket}min")
        mean, low, high = grouped.mean(), grouped.min(), grouped.max()
    else:
        mean = low = high = kw
    fig = go.Figure()
    if bucket > 1:
        fig.add_trace(go.Scatter(x=high.index, y=high["total_power_w"], mode="lines",
                                 line={"width": 0}, showlegend=False, hoverinfo="skip",
                                 name="total, per-minute max"))
        fig.add_trace(go.Scatter(x=low.index, y=low["total_power_w"], mode="lines",
                                 line={"width": 0}, fill="tonexty",
                                 fillcolor="rgba(214, 39, 40, 0.18)",
                                 name="total, per-minute min-max"))
    for col, name in (("total_power_w", "total"), ("batch_power_w", "batch"),
                      ("inference_power_w", "inference")):
        fig.add_trace(go.Scatter(x=mean.index, y=mean[col], mode="lines", name=name,
                                 line={"width": 1.8 if name == "total" else 1.2,
                                       "color": _POWER_COLORS[name]}))
    what = "per minute" if bucket == 1 else f"{bucket}-minute mean, per-minute min-max band"
    full = f"Power ({what}) - {title}" + (f" - {SYNTHETIC_LABEL}" if synthetic else "")
    fig.update_layout(title=full, height=420, yaxis_title="power (kW)",
                      margin={"l": 60, "r": 20, "t": 60, "b": 40},
                      xaxis={"title": "time", "rangeslider": {"visible": True, "thickness": 0.08}},
                      legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right",
                              "yanchor": "bottom"})
    return label_synthetic(fig, synthetic)


def power_sweep_chart(table: pd.DataFrame, share: float | None = None,
                      utilization: float | None = None, synthetic: bool = False) -> go.Figure:
    """CV of total power and median ramps vs the *realised* inference share (served inference
    GPU-minutes / busy GPU-minutes, issue 18 item 13), one line per utilisation; the hover
    gives the nominal share and the realised utilisation. Tables without
    ``realized_inference_share`` are drawn against the nominal share.

    Parameters
    ----------
    table : sweep rows with ``utilization``, ``inference_share``, ``cv``, ``ramp_1min``,
        ``ramp_5min``, ``ramp_15min`` and optionally ``realized_inference_share``,
        ``realized_utilization``
    share, utilization : the scenario shown above the chart (its sweep point is circled)
    synthetic : label the figure as synthetic

    Where the table has ``cv_lo95`` / ``cv_hi95`` (and ``ramp_15min_lo95`` / ``_hi95``), the
    95 % t-interval across replications is drawn as a shaded band around the CV and the 15-minute
    ramp (none where it is undefined: one replication).
    """
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "coefficient of variation of total power", "median |change| of normalised power"))
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]
    dashes = {"ramp_15min": "solid", "ramp_5min": "dash", "ramp_1min": "dot"}
    realised = "realized_inference_share" in table.columns
    xcol = "realized_inference_share" if realised else "inference_share"
    for i, (u, g) in enumerate(table.sort_values("inference_share").groupby("utilization")):
        color = palette[i % len(palette)]
        hover = [f"nominal share {s:g}" + (f", realised U {r:.2f}" if realised else "")
                 for s, r in zip(g["inference_share"], g.get("realized_utilization",
                                                              g["inference_share"]),
                                 strict=True)]
        _band(fig, g, xcol, "cv", color, f"CV 95 % band, U={u:g}", 1)
        _band(fig, g, xcol, "ramp_15min", color, f"15min ramp 95 % band, U={u:g}", 2)
        fig.add_trace(go.Scatter(x=g[xcol], y=g["cv"], mode="lines+markers", text=hover,
                                 name=f"CV, U={u:g}", line={"color": color}), row=1, col=1)
        for col, dash in dashes.items():
            fig.add_trace(go.Scatter(x=g[xcol], y=g[col], mode="lines+markers", text=hover,
                                     name=f"{col.split('_')[1]} ramp, U={u:g}",
                                     line={"color": color, "dash": dash}), row=1, col=2)
    if share is not None and utilization is not None:
        mine = table[(table["utilization"] - utilization).abs() < 1e-9]
        if not mine.empty:
            near = mine.iloc[(mine["inference_share"] - share).abs().argsort()[:1]]
            fig.add_trace(go.Scatter(
                x=near[xcol], y=near["cv"], mode="markers",
                name=f"this scenario (share {share:g})",
                marker={"size": 14, "symbol": "circle-open", "color": "black"}), row=1, col=1)
    fig.update_xaxes(title_text=("realised inference share of busy GPU-time" if realised else
                                 "inference share of offered GPU-time"), range=[-0.03, 1.03])
    fig.update_yaxes(title_text="CV", row=1, col=1)
    fig.update_yaxes(title_text="fraction of mean power", row=1, col=2)
    title = "Inference-share sweep (GPU count and utilisation fixed)"
    fig.update_layout(title=title + (f" - {SYNTHETIC_LABEL}" if synthetic else ""), height=430,
                      margin={"l": 60, "r": 20, "t": 80, "b": 40})
    return label_synthetic(fig, synthetic)


def power_psd_chart(validation: dict) -> go.Figure:
    """Welch power spectral density of the replayed and the generated per-minute request
    counts (the request-group model's replay validation,
    :func:`analytics.power.requests.validate`), log scale.

    Parameters
    ----------
    validation : ``psd_freq_per_min``, ``psd_replay``, ``psd_generated``, ``psd_log10_mad``
    """
    fig = go.Figure()
    f = validation["psd_freq_per_min"]
    for key, name, color in (("psd_replay", "replayed trace", "#1f77b4"),
                             ("psd_generated", "request-group model", "#ff7f0e")):
        fig.add_trace(go.Scatter(x=f[1:], y=validation[key][1:], mode="lines+markers",
                                 name=name, line={"color": color}))
    fig.update_layout(title=("Replay validation: PSD of per-minute requests (mean |log10 "
                             f"ratio| {validation['psd_log10_mad']:.2f})"), height=340,
                      xaxis_title="frequency (1/min)", yaxis={"title": "PSD", "type": "log"},
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return fig


def _band(fig: go.Figure, g: pd.DataFrame, xcol: str, col: str, color: str, name: str,
          subplot: int) -> None:
    """A shaded band between ``<col>_lo95`` and ``<col>_hi95`` of ``g`` (sorted by share; x from
    ``xcol``) in subplot ``subplot``; nothing when the columns are missing or all NaN."""
    lo, hi = f"{col}_lo95", f"{col}_hi95"
    if lo not in g or hi not in g or g[[lo, hi]].isna().all().all():
        return
    x = g[xcol].tolist()
    fig.add_trace(go.Scatter(x=x + x[::-1], y=g[hi].tolist() + g[lo].tolist()[::-1],
                             fill="toself", mode="lines", line={"width": 0}, fillcolor=color,
                             opacity=0.15, name=name, hoverinfo="skip", showlegend=False),
                  row=1, col=subplot)


def jobs_daily_chart(daily: pd.DataFrame, name: str) -> go.Figure:
    """GPU-hours of the batch jobs submitted per day (:func:`analytics.services.power.
    jobs_per_day`): the batch demand the simulation draws its arrivals from."""
    fig = go.Figure(go.Bar(x=daily["day"], y=daily["gpu_h"], name="GPU-hours",
                           customdata=daily["jobs"],
                           hovertemplate="%{x|%Y-%m-%d}: %{y:,.0f} GPU-h, %{customdata} jobs"
                                         "<extra></extra>"))
    fig.update_layout(title=f"{name} - GPU-hours of the jobs submitted per day", height=260,
                      yaxis_title="GPU-hours", xaxis_title="submit day (UTC)",
                      margin={"l": 60, "r": 20, "t": 50, "b": 40})
    return fig


def power_daily_chart(profile: pd.DataFrame, synthetic: bool = False) -> go.Figure:
    """Mean power by hour of day, each component relative to its own mean.

    Parameters
    ----------
    profile : ``hour``, ``total``, ``batch``, ``inference`` (see
        :func:`analytics.power.daily_profile`)
    """
    fig = go.Figure()
    for name in ("total", "batch", "inference"):
        if profile[name].notna().any():
            fig.add_trace(go.Scatter(x=profile["hour"], y=profile[name], mode="lines+markers",
                                     name=name, line={"color": _POWER_COLORS[name]}))
    fig.add_hline(y=1.0, line={"color": "grey", "dash": "dot"})
    title = "Daily profile: mean power by hour / component mean"
    fig.update_layout(title=title + (f" - {SYNTHETIC_LABEL}" if synthetic else ""), height=340,
                      xaxis={"title": "hour of day", "dtick": 3}, yaxis_title="relative power",
                      margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return label_synthetic(fig, synthetic)
