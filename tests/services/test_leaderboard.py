"""The leaderboard's numbers (issue 30 item 3) on the advisor's staged grids (ML.ENERGY v2 /
v3, Argonne): measured runs per GPU, the Pareto fronts, and the advisor's predicted arms
drawn with their calibrated q10-q90 on both axes."""

from __future__ import annotations

import numpy as np
import pytest

from analytics import store
from analytics.advisor import decide
from analytics.hardware import catalog
from analytics.services import advisor as advisor_service
from analytics.services import fleet
from analytics.ui.charts import pareto_chart


@pytest.fixture(scope="module")
def board(bench_db):
    con = store.connect(bench_db, read_only=True)
    try:
        return fleet.leaderboard(con)
    finally:
        con.close()


def test_every_served_run_is_on_the_board_per_gpu(board, bench_db):
    con = store.connect(bench_db, read_only=True)
    bench = store.bench_runs(con)
    con.close()
    served = bench[(bench["failed"].fillna(False) == False) & (bench["throughput_tok_s"] > 0)]  # noqa: E712
    assert len(board) == len(served) > 4000
    assert (board["tok_s_per_gpu"] * board["n_gpus"].clip(lower=1)).to_numpy() == \
        pytest.approx(board["throughput_tok_s"].to_numpy())
    # a front per (model, task): each has one, and no run on it is beaten on both axes
    for _, g in board[board["energy_per_token_j"].notna()].groupby(["model", "task"]):
        front = g[g["pareto_energy"]]
        assert len(front) >= 1
        best = g.loc[g["tok_s_per_gpu"].idxmax()]
        assert bool(best["pareto_energy"]) or (g["tok_s_per_gpu"] == best["tok_s_per_gpu"]).sum() > 1
    unpriced = board[board["hardware"].map(lambda h: catalog.CATALOG.get(h) is None
                                           or catalog.CATALOG[h].price_usd_per_h is None)]
    assert unpriced["usd_per_1m_tokens"].isna().all() and not unpriced["pareto_usd"].any()


def test_the_predicted_arms_are_drawn_with_their_calibrated_intervals(board, adv):
    req = decide.Request("Qwen/Qwen3-14B", 14.0, 128, 1024, 512, task="lm-arena-chat")
    scored = advisor_service.advise(adv, req, advisor_service.utility())
    arms = fleet.predicted_arms(scored)
    assert len(arms) and arms["feasible"].all()
    h = arms[arms["hardware"] == "H100-80GB"].iloc[0]
    per_h = catalog.CATALOG["H100-80GB"].price_usd_per_h * max(int(h["n_gpus"]), 1) / 3600 * 1e6
    assert h["usd_per_1m_tokens_q10"] == pytest.approx(per_h / h["throughput_tok_s_q90"])
    assert h["usd_per_1m_tokens_q90"] == pytest.approx(per_h / h["throughput_tok_s_q10"])
    # the session's advisor fits throughput, ITL and power (no J/token): the $ axis
    fig = pareto_chart(board[board["model"] == "Qwen/Qwen3-14B"], "usd_per_1m_tokens", arms)
    traces = {t.name: t for t in fig.data}
    drawn = traces["predicted (calibrated q10-q90)"]
    inside = arms[~arms["abstain"]]
    gpus = inside["n_gpus"].clip(lower=1).to_numpy(float)
    assert np.allclose(drawn.x, inside["throughput_tok_s_q50"] / gpus)
    assert np.allclose(drawn.error_x.array, (inside["throughput_tok_s_q90"]
                                             - inside["throughput_tok_s_q50"]) / gpus)
    assert np.allclose(np.asarray(drawn.error_y.array, float),
                       (inside["usd_per_1m_tokens_q90"] - inside["usd_per_1m_tokens_q50"]),
                       equal_nan=True)
    energy = pareto_chart(board[board["model"] == "Qwen/Qwen3-14B"], "energy_per_token_j", arms)
    assert not any("predicted" in (t.name or "") for t in energy.data)  # no J/token model
    if arms["abstain"].any():
        assert "predicted, outside measured support (abstains)" in traces
