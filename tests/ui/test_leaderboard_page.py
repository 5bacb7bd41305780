"""The Leaderboard page (issue 30 item 3) on the real ML.ENERGY v3 leaderboard: the measured
runs per GPU with J/token and $ per 1M tokens, the Pareto front by hand, and a link that reopens
the same view."""

from __future__ import annotations

import pandas as pd
import pytest
from harness import new_app, seed, shared

FLAT = "ml_energy/leaderboard_v3/all_task_configurations_flat.csv"
PICK = "Qwen/Qwen3-14B (lm-arena-chat)"


@pytest.fixture(scope="module")
def board_template(tmp_path_factory):
    """The ML.ENERGY v3 store, ingested once (each test gets a copy)."""
    path = tmp_path_factory.mktemp("leaderboard") / "template.duckdb"
    seed(path, FLAT)
    return path


@pytest.fixture
def board_app(app_env, board_template):
    app_env["db"].write_bytes(board_template.read_bytes())
    return app_env


def _frame(at) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if "tok_s_per_gpu" in d.value.columns)


def test_the_board_shows_the_measured_runs_and_their_front(board_app):
    at = new_app().run()
    at.switch_page("pages/leaderboard.py").run()
    assert not at.exception, [e.value for e in at.exception]
    at.selectbox(key="lb_model").set_value(PICK).run()
    table = _frame(at)
    raw = pd.read_csv(shared(FLAT))
    raw = raw[(raw["model_id"] == "Qwen/Qwen3-14B") & (raw["task"] == "lm-arena-chat")]
    assert len(table) == len(raw)  # every run, none invented
    h100 = table[(table["hardware"] == "H100-80GB") & (table["concurrency"] == 128)].iloc[0]
    assert h100["tok_s_per_gpu"] == pytest.approx(4474.35, abs=0.01)
    # $ per 1M tokens by hand: the catalog's p5.48xlarge list price / 8 per GPU-hour
    assert h100["usd_per_1m_tokens"] == pytest.approx(98.32 / 8 / (4474.3507 * 3600) * 1e6,
                                                      rel=1e-4)
    # the J/token front by hand: no other run has more tok/s per GPU and fewer J/token
    for r in table.itertuples():
        beaten = ((table["tok_s_per_gpu"] >= r.tok_s_per_gpu)
                  & (table["energy_per_token_j"] <= r.energy_per_token_j)
                  & ((table["tok_s_per_gpu"] > r.tok_s_per_gpu)
                     | (table["energy_per_token_j"] < r.energy_per_token_j))).any()
        assert table.loc[r.Index, "on the J/token front"] == (not beaten)
    assert table["on the J/token front"].any()
    fig = at.get("plotly_chart")[0].proto.spec
    assert "Pareto front (measured)" in fig and "H100-80GB (measured)" in fig
    # the link reopens the same view
    at.radio(key="lb_axis").set_value("usd_per_1m_tokens").run()
    link = dict(at.query_params)
    assert link["lb_model"] == PICK and link["lb_axis"] == "usd_per_1m_tokens"
    fresh = new_app()
    fresh.query_params.update(link)
    fresh.switch_page("pages/leaderboard.py").run()
    assert not fresh.exception
    assert fresh.selectbox(key="lb_model").value == PICK
    assert fresh.radio(key="lb_axis").value == "usd_per_1m_tokens"
    assert _frame(fresh).equals(_frame(at))


def test_with_a_fitted_advisor_the_predicted_arms_are_drawn(board_app):
    from analytics import store
    from analytics.advisor.model import FitParams
    from analytics.services import advisor

    con = store.connect(board_app["db"])
    try:
        advisor.fit_on(con, FitParams())  # stored beside the store, as the Placement fit is
    finally:
        con.close()
    at = new_app().run()
    at.switch_page("pages/leaderboard.py").run()
    at.selectbox(key="lb_model").set_value(PICK).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Predicted arms: the launch advisor's calibrated q10-q90 at" in c.value
               for c in at.caption), [c.value for c in at.caption]
    fig = at.get("plotly_chart")[0].proto.spec
    assert "predicted (calibrated q10-q90)" in fig
    at.number_input(key="lb_conc").set_value(4096).run()  # past the measured concurrencies
    assert not at.exception
