"""Launch decision, break-even value per token and the ranking's sensitivity to it.

Issue 18 item 4: at the paper's value per token (2e-7 USD, OmniPilot Sec. 3.3.1) and list
prices, nearly every arm has a negative utility, so "the best arm" is only the least bad one.
The utility of :func:`analytics.advisor.decide.utility` is linear in the value per token ``v``::

    U(v) = v * S - C
    S = throughput_tok_s * kv_factor * (1 - p_slo) * 3600 * runtime_h     (served_tokens)
    C = compute_usd + queue_usd + failure_usd                             (none depends on v)

so an arm breaks even at ``v* = C / S`` (``S > 0``), and the best ranked arm's utility reaches 0
at the smallest ``v*`` over the ranked arms (below it every ranked arm loses money, above it
that arm does not). Abstention, feasibility and prices do not depend on ``v``, so the ranked
set is the same at every ``v`` and one scored frame gives the whole sensitivity curve.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

#: Value-per-token grid of the sensitivity chart, USD: 20 log-spaced points, 1e-8 .. 1e-5.
GRID_USD = np.logspace(-8, -5, 20)


def grid_for(break_even_usd: float | None) -> np.ndarray:
    """:data:`GRID_USD`, or, when the break-even lies above 1e-5 USD, 20 log-spaced points from
    1e-8 up to the next power of ten above it (so the chart shows the crossing)."""
    if break_even_usd is None or not np.isfinite(break_even_usd) or break_even_usd <= 1e-5:
        return GRID_USD
    return np.logspace(-8, math.ceil(math.log10(break_even_usd)), 20)


def _label(r) -> str:
    return f"{r['hardware']} x{int(r['tp'])} {r['precision']}"


def _ranked(scored: pd.DataFrame) -> pd.DataFrame:
    return scored[scored["rank"].notna()].sort_values("rank")


def _slope_cost(ranked: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(S tokens, C USD) per ranked arm, as in the module docstring."""
    cost = (ranked["compute_usd"] + ranked["queue_usd"] + ranked["failure_usd"]).to_numpy(float)
    return ranked["served_tokens"].to_numpy(float), cost


def break_even(scored: pd.DataFrame) -> dict:
    """Smallest value per token (USD) at which a ranked arm's utility is >= 0.

    Parameters
    ----------
    scored : :func:`analytics.advisor.decide.advise` output (needs ``rank``, ``served_tokens``,
        ``compute_usd``, ``queue_usd``, ``failure_usd``)

    Returns
    -------
    dict: ``value_per_token_usd`` (float, or None), ``arm`` (label of the arm that breaks even
    first, or None), ``reason`` (None, or why there is no break-even: no ranked arm, or no
    ranked arm serves any token).
    """
    ranked = _ranked(scored)
    if ranked.empty:
        return {"value_per_token_usd": None, "arm": None,
                "reason": "no arm is ranked (every arm abstains, is infeasible or has no price)"}
    served, cost = _slope_cost(ranked)
    ok = np.isfinite(served) & np.isfinite(cost) & (served > 0)
    if not ok.any():
        return {"value_per_token_usd": None, "arm": None,
                "reason": "no ranked arm serves tokens (KV factor 0 or SLO always violated)"}
    v = np.where(ok, cost / np.where(ok, served, 1.0), np.inf)
    i = int(np.argmin(v))
    return {"value_per_token_usd": float(max(v[i], 0.0)), "arm": _label(ranked.iloc[i]),
            "reason": None}


def decision(scored: pd.DataFrame) -> dict:
    """Launch or not at the scored value per token.

    Returns
    -------
    dict: ``decision`` ("launch" when the best ranked arm's utility is >= 0, "do_not_launch"
    when it is negative, None when no arm is ranked: the advisor abstains), ``best_arm``,
    ``best_utility_usd``, ``reason`` (a sentence).
    """
    ranked = _ranked(scored)
    if ranked.empty:
        return {"decision": None, "best_arm": None, "best_utility_usd": None,
                "reason": "no arm is ranked: the advisor abstains (see the fallback arm)"}
    best = ranked.iloc[0]
    u = float(best["utility"])
    if u >= 0:
        return {"decision": "launch", "best_arm": _label(best), "best_utility_usd": u,
                "reason": "the best arm's expected utility is not negative"}
    return {"decision": "do_not_launch", "best_arm": _label(best), "best_utility_usd": u,
            "reason": "do not launch at this value per token: every ranked arm's expected "
                      "utility is negative (the best arm is only the least costly)"}


def sensitivity(scored: pd.DataFrame, grid=GRID_USD) -> pd.DataFrame:
    """Best ranked arm and its utility across value per token, in one array pass.

    ``U[i, j] = grid[i] * S[j] - C[j]`` for the ranked arms ``j`` (module docstring).

    Returns
    -------
    DataFrame, one row per grid value: ``value_per_token_usd``, ``best_arm``,
    ``best_utility_usd``, ``positive_arms`` (ranked arms with U >= 0), ``decision``. Empty
    (same columns) when no arm is ranked.
    """
    cols = ["value_per_token_usd", "best_arm", "best_utility_usd", "positive_arms", "decision"]
    ranked = _ranked(scored)
    served, cost = _slope_cost(ranked)
    ok = np.isfinite(served) & np.isfinite(cost)
    if not ok.any():
        return pd.DataFrame(columns=cols)
    grid = np.asarray(grid, dtype=float)
    util = grid[:, None] * served[ok][None, :] - cost[ok][None, :]
    best = util.argmax(axis=1)
    labels = np.array([_label(r) for r in ranked[ok].to_dict("records")])
    top = util[np.arange(len(grid)), best]
    return pd.DataFrame({"value_per_token_usd": grid, "best_arm": labels[best],
                         "best_utility_usd": top, "positive_arms": (util >= 0).sum(axis=1),
                         "decision": np.where(top >= 0, "launch", "do_not_launch")})


def support_warning(scored: pd.DataFrame) -> str | None:
    """A sentence when an arm outside the measured support (abstaining, so never ranked; the
    paper's low-confidence flag, Sec. 3.1) has a higher predicted utility than the best ranked
    arm, or when no arm is ranked but flagged arms have a utility; None otherwise."""
    flagged = scored[scored["rank"].isna() & scored["abstain"] & scored["feasible"]
                     & scored["utility"].notna()]
    if flagged.empty:
        return None
    top = flagged.sort_values("utility", ascending=False).iloc[0]
    ranked = _ranked(scored)
    if not ranked.empty and top["utility"] <= ranked.iloc[0]["utility"]:
        return None
    claim = (f"is predicted better ({top['utility']:.2f} USD) than the best ranked arm "
             f"({ranked.iloc[0]['utility']:.2f} USD)" if not ranked.empty else
             f"has the highest predicted utility ({top['utility']:.2f} USD; no arm is ranked)")
    return (f"{_label(top)} {claim} but lies {top['support']}: {top['abstain_axis']}. Low "
            "confidence, so it is not ranked; benchmark it before relying on it")
