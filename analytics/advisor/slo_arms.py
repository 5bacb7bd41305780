"""Capacity at a latency SLO for arms no benchmark ran (issue 30 item 1): the cost model's
calibrated prediction where an arm is not measured, with abstention outside measured support.

The cost model (:mod:`analytics.advisor.model`) is fitted on the SLO's percentile columns too
(``itl_p99_ms``, ``ttft_p90_ms`` ...: the tail percentiles the benchmark files carry, schema
21). For an arm (GPU kind x TP x precision) at each concurrency of :data:`CONCURRENCIES`, the
SLO is judged on the **calibrated q90** of each limit's percentile (the upper end of the
held-out-cell CQR band, OmniPilot Sec. 3.2): the arm meets it at a concurrency when every
stated limit is above that upper bound. The arm's knee is the highest concurrency of an
unbroken run from the lowest one inside measured support (past the first break, or past the
measured concurrencies, none is tried), and its
capacity is the one-sided held-out-cell lower bound of the throughput there
(:mod:`analytics.advisor.lower`).

An arm abstains at a concurrency outside the measured support of the throughput model or of
a limit's own percentile model (a percentile measured only on H100 and B200 says nothing of an
A100), or that does not fit in memory (:mod:`analytics.advisor.memory`, through
:func:`analytics.advisor.decide.advise`). Every function here is pure.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analytics.advisor import lower
from analytics.advisor.model import CostModel, outside

#: Concurrencies an arm is tried at (the sweeps' powers of two).
CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
#: The identity of an arm among the advisor's scored rows.
ARM = ("hardware", "n_gpus", "tp", "precision")


def _key(row) -> tuple:
    return tuple(row[c] for c in ARM)


def predicted_knees(cost: CostModel, scored: dict[int, pd.DataFrame], limits: dict[str, float],
                    capacity_risk: float, workload: dict, skip: set[tuple] = frozenset()
                    ) -> pd.DataFrame:
    """Per arm of the advisor's scored rows (``scored``: concurrency -> the frame
    :func:`analytics.advisor.decide.advise` returns for the model at that concurrency), its
    predicted knee at ``limits`` (SLO limit -> value; each limit names the percentile column
    the cost model was fitted on, e.g. ``itl_p99_ms``) and the throughput lower bound there at
    miscoverage ``capacity_risk`` in (0, 1). ``workload``: the request's ``params_b``,
    ``in_len``, ``out_len``, ``task``, ``framework`` (what the support is judged on, with the
    concurrency). Arms in ``skip`` (:data:`ARM` tuples: the measured ones) are left out.

    Returns
    -------
    DataFrame, one row per arm: :data:`ARM`, ``status`` (``meets``, ``breaks``, ``abstains``,
    ``unmeasured``), ``concurrency`` (the knee), ``throughput_tok_s`` (q50 there),
    ``lower_tok_s`` (the lower bound), ``energy_per_token_j`` (q50 there, NaN when not
    fitted), ``judged_on`` (the calibrated upper bounds that judged the knee), ``why``.

    Raises ValueError: ``capacity_risk`` outside (0, 1); KeyError: no throughput prediction.
    """
    offset = lower.offset(cost.oof, capacity_risk)
    missing = [t for t in limits if t not in cost.models]
    out = []
    arms = {}
    for c in sorted(scored):
        for row in scored[c].to_dict("records"):
            arms.setdefault(_key(row), {})[c] = row
    for key, by_c in sorted(arms.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if key in skip:
            continue
        rec = dict(zip(ARM, key, strict=True))
        if missing:
            out.append(rec | {"status": "unmeasured", "why": "the cost model has no "
                              f"prediction of {', '.join(missing)} (too few measured runs)"})
            continue
        knee, why = None, None
        for c in sorted(by_c):
            row = {**by_c[c], **workload, "concurrency": float(c)}
            if not row["feasible"]:
                why = f"at {c} concurrent: {row['why_infeasible']}"
                break
            off = (row["abstain_axis"] or "outside measured support") if row["abstain"] else \
                next((f"the percentile model: {outside(cost.metrics[t]['support'], row)}"
                      for t in limits if outside(cost.metrics[t]["support"], row)), None)
            if off is not None:
                why = f"at {c} concurrent: {off}"  # the last tried says the most
                if knee is None:
                    continue  # below the measured concurrencies: try the next
                break  # past them: the knee stays where support ended
            if not all(row[f"{t}_q90"] <= v for t, v in limits.items()):
                why = f"the SLO breaks at {c} concurrent (predicted upper bound)"
                break
            knee = row
        if knee is None:
            status = "breaks" if why and "the SLO breaks" in why else "abstains"
            out.append(rec | {"status": status, "why": why})
            continue
        bound = float(knee["throughput_tok_s_q10"]) * math.exp(-offset)
        out.append(rec | {
            "status": "meets", "concurrency": float(knee.get("concurrency", np.nan)),
            "throughput_tok_s": float(knee["throughput_tok_s_q50"]), "lower_tok_s": bound,
            "energy_per_token_j": float(knee.get("energy_per_token_j_q50", np.nan)),
            "judged_on": ", ".join(f"{t} q90 {knee[f'{t}_q90']:.1f} <= {v:g}"
                                   for t, v in limits.items()),
            "why": why})
    cols = (*ARM, "status", "concurrency", "throughput_tok_s", "lower_tok_s",
            "energy_per_token_j", "judged_on", "why")
    return pd.DataFrame(out).reindex(columns=cols)
