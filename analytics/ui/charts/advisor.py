"""Launch-advisor charts (OmniPilot paper): ranked arms with q10-q90 bars, backtest,
calibration, launch priors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots


def _arm_label(r) -> str:
    return f"{r['hardware']} x{int(r['tp'])} {r['precision']}"


def advisor_arms_chart(scored: pd.DataFrame, top: int = 12) -> go.Figure:
    """Ranked arms: q50 throughput bars with calibrated q10-q90 error bars; up to ``top`` ranked
    arms, then (greyed) the best abstaining and infeasible ones for contrast."""
    ranked = scored[scored["rank"].notna()].sort_values("rank").head(top)
    rest = scored[scored["rank"].isna()].head(max(0, top - len(ranked)) or 4)
    df = pd.concat([ranked, rest])
    status = np.where(df["rank"].notna(), "ranked",
                      np.where(~df["feasible"], "infeasible",
                               np.where(df["abstain"], "abstain", "no price")))
    colors = {"ranked": "#1f77b4", "abstain": "#ff7f0e", "infeasible": "#bbbbbb",
              "no price": "#9467bd"}
    fig = go.Figure()
    for st_name in ("ranked", "abstain", "no price", "infeasible"):
        sel = df[status == st_name]
        if sel.empty:
            continue
        q50 = sel["throughput_tok_s_q50"]
        fig.add_trace(go.Bar(
            y=[("#" + str(int(r)) + " " if r == r else "") + _arm_label(row)
               for r, (_, row) in zip(sel["rank"], sel.iterrows(), strict=True)],
            x=q50, orientation="h", name=st_name, marker_color=colors[st_name],
            error_x={"type": "data", "symmetric": False,
                     "array": sel["throughput_tok_s_q90"] - q50,
                     "arrayminus": q50 - sel["throughput_tok_s_q10"]},
            hovertext=[(row["abstain_axis"] or row["why_infeasible"] or
                        f"utility ${row['utility']:.2f}") for _, row in sel.iterrows()]))
    fig.update_layout(title="Arms: output throughput q50 with calibrated q10-q90",
                      xaxis_title="output tokens/s (all GPUs of the arm)",
                      yaxis={"autorange": "reversed"}, height=120 + 28 * len(df),
                      margin={"l": 10, "r": 10, "t": 50, "b": 40}, barmode="overlay")
    return fig


def value_sensitivity_chart(sens: pd.DataFrame, value_per_token: float,
                            break_even: float | None) -> go.Figure:
    """Best ranked arm's utility (USD over the runtime) across value per output token (log x),
    one marker colour per best arm, the zero line, the chosen value and the break-even."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=sens["value_per_token_usd"], y=sens["best_utility_usd"],
                             mode="lines", line={"color": "#bbbbbb"}, showlegend=False,
                             hoverinfo="skip"))
    for arm, sel in sens.groupby("best_arm", sort=False):
        fig.add_trace(go.Scatter(x=sel["value_per_token_usd"], y=sel["best_utility_usd"],
                                 mode="markers", name=f"best: {arm}", marker={"size": 9}))
    fig.add_hline(y=0, line_dash="dot", line_color="#888888")
    if value_per_token > 0:
        fig.add_vline(x=value_per_token, line_dash="dash", line_color="#1f77b4",
                      annotation_text="chosen")
    if break_even:
        fig.add_vline(x=break_even, line_dash="dash", line_color="#d62728",
                      annotation_text="break-even", annotation_position="bottom right")
    fig.update_layout(title="Best arm and its utility across value per output token",
                      xaxis={"type": "log", "title": "value per output token (USD)"},
                      yaxis_title="best arm's expected utility (USD over the runtime)",
                      height=420, margin={"l": 10, "r": 10, "t": 50, "b": 40})
    return fig


def backtest_chart(bt: dict) -> go.Figure:
    """Top-1 accuracy and mean regret per policy (two panels), with the bootstrap 95 % intervals
    over cells as error bars where the backtest gives them."""
    pol = pd.DataFrame(bt["policies"]).T.reset_index(names="policy")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("top-1 accuracy", "mean regret"))

    def err(col):
        if f"{col}_ci95" not in pol:
            return None
        ci = pol[f"{col}_ci95"]
        lo, hi = ci.map(lambda c: c[0]).astype(float), ci.map(lambda c: c[1]).astype(float)
        y = pol[col].astype(float)
        return {"type": "data", "symmetric": False, "array": hi - y, "arrayminus": y - lo}

    fig.add_trace(go.Bar(x=pol["policy"], y=pol["top1"], name="top-1", error_y=err("top1")),
                  row=1, col=1)
    fig.add_trace(go.Bar(x=pol["policy"], y=pol["regret"], name="regret",
                         error_y=err("regret")), row=1, col=2)
    fig.update_layout(showlegend=False, height=380,
                      title=f"Leakage-free backtest over {bt['cells']} held-out workload cells")
    return fig


def calibration_chart(metrics: dict) -> go.Figure:
    """Per target: coverage of raw quantiles, random-fold offset, held-out-cell offset vs the
    nominal level."""
    rows = [{"target": t, "kind": k, "coverage": m["coverage"][k]}
            for t, m in metrics.items() if m.get("fitted")
            for k in ("raw", "random_fold", "held_out_cell")]
    df = pd.DataFrame(rows)
    fig = go.Figure()
    for k in ("raw", "random_fold", "held_out_cell"):
        sel = df[df["kind"] == k]
        fig.add_trace(go.Bar(x=sel["target"], y=sel["coverage"], name=k.replace("_", " ")))
    nominal = next(m["coverage"]["nominal"] for m in metrics.values() if m.get("fitted"))
    fig.add_hline(y=nominal, line_dash="dash", annotation_text=f"nominal {nominal:.0%}")
    fig.update_layout(barmode="group", yaxis={"range": [0, 1], "title": "coverage on held-out "
                                                                         "cells"},
                      title="Interval coverage on unseen workload cells", height=380)
    return fig


def support_chart(support: pd.DataFrame) -> go.Figure:
    """Benchmark runs per GPU kind x precision (:func:`analytics.services.advisor.bench_support`):
    where the cost model has measured support; arms elsewhere abstain."""
    table = support.pivot(index="hardware", columns="precision", values="runs")
    text = table.map(lambda v: "" if pd.isna(v) else f"{int(v):,}")
    fig = go.Figure(go.Heatmap(z=table.to_numpy(dtype=float), x=list(table.columns),
                               y=list(table.index), text=text.to_numpy(), texttemplate="%{text}",
                               colorscale="Blues", colorbar={"title": "runs"},
                               hovertemplate="%{y} %{x}: %{z} runs<extra></extra>"))
    fig.update_layout(title="Measured support: benchmark runs per GPU kind x precision",
                      height=120 + 36 * len(table.index), xaxis_title="precision",
                      margin={"l": 110, "r": 20, "t": 50, "b": 40})
    return fig


def launch_priors_chart(pri: pd.DataFrame) -> go.Figure:
    """Raw vs shrunk launch-success rate per GPU count, with the posterior interval."""
    fig = go.Figure()
    for kind, g in pri.groupby("gpu_kind"):
        x = [f"{kind} x{n}" for n in g["n_gpus"]]
        fig.add_trace(go.Scatter(x=x, y=g["raw_rate"], mode="markers", name=f"{kind} raw",
                                 marker={"symbol": "x", "size": 10},
                                 text=[f"{s}/{n}" for s, n in zip(g["successes"], g["trials"],
                                                                  strict=True)]))
        fig.add_trace(go.Scatter(
            x=x, y=g["posterior_mean"], mode="markers", name=f"{kind} shrunk",
            error_y={"type": "data", "symmetric": False, "array": g["hi"] - g["posterior_mean"],
                     "arrayminus": g["posterior_mean"] - g["lo"]}))
    fig.add_hline(y=float(pri["prior_mean"].iloc[0]), line_dash="dot",
                  annotation_text="pooled prior mean")
    fig.update_layout(title="Launch-success prior per configuration (beta-binomial shrinkage)",
                      yaxis={"range": [0, 1], "title": "P(launch succeeds)"}, height=380)
    return fig


_POLICY_COLORS = {"voi": "#d62728", "uncertainty": "#1f77b4", "random": "#7f7f7f",
                  "cheapest": "#2ca02c"}


def voi_regret_chart(bt: dict) -> go.Figure:
    """Mean regret of the recommended arm vs cumulative benchmark node-hours (log x), one line
    per policy with its min-max band over the seeds; the 0-hour point (the same start for every
    policy) is left out of the log axis."""
    hours = np.asarray(bt["hours"], dtype=float)
    keep = hours > 0
    fig = go.Figure()
    for name, c in bt["curves"].items():
        color = _POLICY_COLORS.get(name, "#9467bd")
        x = hours[keep]
        lo, hi = np.asarray(c["lo"])[keep], np.asarray(c["hi"])[keep]
        fig.add_trace(go.Scatter(x=np.concatenate([x, x[::-1]]), y=np.concatenate([hi, lo[::-1]]),
                                 fill="toself", fillcolor=color, opacity=0.15,
                                 line={"width": 0}, hoverinfo="skip", showlegend=False,
                                 legendgroup=name))
        fig.add_trace(go.Scatter(x=x, y=np.asarray(c["mean"])[keep], mode="lines",
                                 name=name, line={"color": color, "shape": "hv"},
                                 legendgroup=name))
    fig.update_layout(title=f"Regret vs benchmark node-hours ({bt['seeds']} runs of "
                            f"{bt['cells_per_run']} cells; band: min-max over runs)",
                      xaxis={"type": "log", "title": "cumulative benchmark node-hours"},
                      yaxis={"title": "mean regret of the recommended arm (share of |U best|)",
                             "rangemode": "tozero"},
                      height=420, margin={"l": 10, "r": 10, "t": 50, "b": 40})
    return fig
