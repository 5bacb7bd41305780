"""The one-sided held-out-cell lower bound of a replica's throughput (issue 30: the fleet
plan's capacity risk) on the real benchmark grids the advisor fits on (ML.ENERGY v2 / v3,
Argonne): on measured cells its offset never saw, the bound misses at its nominal rate."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analytics.advisor import lower


@pytest.mark.parametrize("alpha", [0.05, 0.10, 0.20])
def test_the_lower_bound_misses_at_its_nominal_rate_on_held_out_cells(adv, alpha):
    got = lower.held_out_lower_coverage(adv.cost.oof, alpha)
    assert got["cells"] > 500 and got["rows"] > 3000
    # the miss rate on unseen cells is the nominal one, within three binomial standard errors
    se = math.sqrt(alpha * (1 - alpha) / got["rows"])
    assert abs(got["miss_rate"] - alpha) <= 3 * se, got
    # another split of the cells, the same answer
    again = lower.held_out_lower_coverage(adv.cost.oof, alpha, seed=1)
    assert abs(again["miss_rate"] - alpha) <= 3 * se, again


def test_the_bound_of_a_knee_is_its_held_out_q10_moved_by_the_offset(adv):
    oof = lower.scores(adv.cost.oof)
    row = oof[(oof["model"] == "Qwen/Qwen3-14B") & (oof["hardware"] == "H100-80GB")
              & (oof["concurrency"] == 128) & (oof["task"] == "lm-arena-chat")].iloc[0]
    # by hand: the (ceil((n+1)(1-a)))-th smallest score, then q10 x exp(-offset)
    s = np.sort(oof["score"].to_numpy())
    k = math.ceil((len(s) + 1) * 0.95)
    bound = lower.knee_bound(adv.cost.oof, row.to_dict(), 0.05)
    assert bound == pytest.approx(row["throughput_tok_s_q10"] * math.exp(-s[k - 1]))
    assert 0 < bound < row["throughput_tok_s"]  # below the measured 4,474 tok/s
    assert lower.knee_bound(adv.cost.oof, {**row.to_dict(), "concurrency": 3.5}, 0.05) is None
    with pytest.raises(ValueError, match="capacity risk"):
        lower.offset(adv.cost.oof, 0.0)
