"""Regression-gated promotion of advisor models, with provenance in ``model_versions``.

OmniPilot paper, Appendix C.2: the decision target is aggregate tokens/s; a candidate is promoted
only if its decision-target error (MAPE on held-out cells) does not regress by more than 0.5
percentage points and it was trained on at least as many rows as the incumbent. The first fit
always promotes.
"""

from __future__ import annotations

import json

import pandas as pd

from analytics.advisor.model import CostModel

DECISION_TARGET = "throughput_tok_s"
MAX_REGRESSION_PP = 0.5


def should_promote(candidate_mape: float, candidate_rows: int,
                   incumbent: dict | None, max_regression_pp: float = MAX_REGRESSION_PP):
    """(promote, reason) for a candidate against the incumbent (``None``: first fit).

    >>> should_promote(10.0, 500, {"mape_pct": 9.8, "rows": 460})
    (True, 'MAPE 10.00% vs incumbent 9.80% (+0.20 pp <= 0.5 pp), rows 500 >= 460')
    >>> should_promote(10.6, 500, {"mape_pct": 10.0, "rows": 460})[0]
    False
    """
    if incumbent is None:
        return True, "first fit always promotes"
    delta = candidate_mape - incumbent["mape_pct"]
    if delta > max_regression_pp:
        return False, (f"MAPE {candidate_mape:.2f}% regresses {delta:+.2f} pp vs incumbent "
                       f"{incumbent['mape_pct']:.2f}% (> {max_regression_pp} pp)")
    if candidate_rows < incumbent["rows"]:
        return False, f"trained on {candidate_rows} rows < incumbent's {incumbent['rows']}"
    return True, (f"MAPE {candidate_mape:.2f}% vs incumbent {incumbent['mape_pct']:.2f}% "
                  f"({delta:+.2f} pp <= {max_regression_pp} pp), rows {candidate_rows} >= "
                  f"{incumbent['rows']}")


def incumbent(versions: pd.DataFrame) -> dict | None:
    """The latest promoted version of a ``model_versions`` frame (newest first) as
    ``{version, rows, mape_pct}``, or None."""
    v = versions[versions["promoted"]] if not versions.empty else versions
    if v.empty:
        return None
    row = v.iloc[0]
    return {"version": int(row["version"]), "rows": int(row["rows"]),
            "mape_pct": json.loads(row["metrics"])[DECISION_TARGET]["mape_pct"]}


def decide_promotion(cost: CostModel, versions: pd.DataFrame) -> dict:
    """Gate a freshly fitted model against the incumbent of ``versions`` (pure): ``promoted``,
    ``reason``, ``mape_pct`` (decision-target MAPE on held-out cells, %), ``rows``."""
    mape = cost.metrics[DECISION_TARGET]["mape_pct"]
    ok, reason = should_promote(mape, cost.rows, incumbent(versions))
    return {"promoted": ok, "reason": reason, "mape_pct": mape, "rows": cost.rows}


def versions_table(versions: pd.DataFrame) -> pd.DataFrame:
    """Model versions with the decision-target MAPE and coverage unpacked for display."""
    v = versions.copy()
    if v.empty:
        return v
    m = v["metrics"].map(json.loads)
    v["mape_pct"] = m.map(lambda d: d.get(DECISION_TARGET, {}).get("mape_pct"))
    v["coverage_held_out_cell"] = m.map(
        lambda d: d.get(DECISION_TARGET, {}).get("coverage", {}).get("held_out_cell"))
    return v[["version", "created_at", "data_version", "rows", "mape_pct",
              "coverage_held_out_cell", "promoted", "reason"]]
