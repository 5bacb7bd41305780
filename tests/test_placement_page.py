"""Placement page (launch advisor) through AppTest, on real ML.ENERGY runs and Slurm history."""

from __future__ import annotations

from conftest import REPO, shared
from streamlit.testing.v1 import AppTest

from analytics import store
from analytics.ingest import files as ingest

APP = str(REPO / "app.py")


def _seed(db, *rels):
    con = store.connect(db)
    ingest.ingest_files(con, [ingest.FileIn(shared(r), shared(r).name) for r in rels])
    con.close()


def test_placement_without_benchmarks_says_how_to_add_them(app_env):
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("pages/placement.py").run()
    assert not at.exception
    assert at.title[0].value == "Placement"
    assert "No benchmark data yet" in at.info[0].value


def test_placement_ranks_arms_and_abstains_for_a_huge_model(app_env):
    _seed(app_env["db"], "ml_energy/leaderboard_v2/llm_text_generation_runs.csv",
          "mit_supercloud/slurm-log-queueing-clean.csv")
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("pages/placement.py").run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["ranked arms"]) > 0
    assert metrics["best arm"] != "none"
    assert at.selectbox(key="adv_model").value == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    # launch priors from the Slurm history are shown
    assert any(d.value.shape[0] == 6 for d in at.dataframe if "posterior_mean" in d.value)

    at.selectbox(key="adv_model").set_value("(custom model)")
    at.button[0].click().run()  # form widgets apply on submit
    at.number_input(key="adv_p_(custom model)").set_value(4000.0)
    at.button[0].click().run()  # the form's submit button
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["ranked arms"] == "0" and metrics["best arm"] == "none"
    assert "abstains" in at.warning[0].value and "params_b 4000" in at.warning[0].value
