"""Serving page (AppTest): empty-store guidance, and a real run on the Azure conv trace."""

from __future__ import annotations

import pytest
from harness import metrics, new_app, seed

FILES = ("azure_llm/AzureLLMInferenceTrace_conv.csv",
         "ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
         "llm_inference_bench_argonne/Fig_21__all_results_TTFT.csv")


def test_serving_page_empty_store_says_how_to_add_data(app_env):
    at = new_app().run()
    at.switch_page("pages/serving.py").run()
    assert not at.exception
    assert at.title[0].value == "Serving"
    assert "headroom ingest" in at.info[0].value


def test_serving_page_runs_on_real_trace_and_margin_changes_results(app_env):
    for rel in FILES:  # one ingest per file, in this order
        seed(app_env["db"], rel)
    at = new_app().run()
    at.switch_page("pages/serving.py").run()
    assert not at.exception
    at.number_input(key="serving_window").set_value(3).run()
    at.number_input(key="serving_tbt").set_value(20).run()  # tight: the margin matters
    assert not at.exception
    assert len(at.get("plotly_chart")) == 5
    before = metrics(at)
    assert before["Festina energy"].endswith("kWh")
    at.slider(key="safety_margin").set_value(0.4).run()
    assert not at.exception
    after = metrics(at)
    assert after["Festina energy"] != before["Festina energy"]
    assert after["Festina TBT attainment"] != before["Festina TBT attainment"]
    # the sensitivity sweep runs on demand and shows the calibrated exponent
    at.button(key="serving_sens_run").click().run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 6
    sens = next(d.value for d in at.dataframe if "static_scale" in d.value.columns)
    assert len(sens) == 12 and sens["calibrated"].sum() == 3
    one = sens[(sens["static_scale"] == 1.0) & sens["calibrated"]].iloc[0]
    assert one["gamma"] == pytest.approx(2.98, abs=0.02)
    assert (sens["max_clock_kwh"] > 0).all()
    # switching calibration off uses the typed exponent
    at.checkbox(key="serving_calibrate").uncheck().run()
    at.number_input(key="serving_gamma").set_value(1.5).run()
    assert not at.exception
    assert any("gamma = 1.5 (given)" in c.value for c in at.caption)
