"""Issue 19 item 13: a page's parameters are in the URL (a link reopens the scenario), and named
scenarios are saved in the store and compared side by side."""

from __future__ import annotations

import pytest
from harness import metrics, new_app, seed, table_with

# the real BurstGPT week at 1-hour bins: 168 bins fit in seconds
WEEK = "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"
NAME = "burstgpt1_week1_per_minute_tps"


def open_capacity(app_env, query: dict[str, str] | None = None):
    seed(app_env["db"], WEEK)
    at = new_app()
    at.query_params.update({"envelope_bin": "1h", **(query or {})})
    at.switch_page("pages/capacity.py").run()  # the link's page is the first one opened
    assert not at.exception
    return at


def test_a_link_reopens_the_capacity_scenario(app_env):
    at = open_capacity(app_env)
    at.slider(key="target_violation").set_value(0.2).run()
    at.select_slider(key="capacity_alpha").set_value(0.2).run()
    link = dict(at.query_params)
    assert link["target_violation"] == "0.2" and link["envelope_alpha"] == "0.2"
    assert link["dataset"] == NAME and link["envelope_bin"] == "1h"
    shown = metrics(at)

    fresh = new_app()  # another browser: a new session opened on the link
    fresh.query_params.update(link)
    fresh.switch_page("pages/capacity.py").run()
    assert not fresh.exception
    assert fresh.slider(key="target_violation").value == pytest.approx(0.2)
    assert fresh.select_slider(key="capacity_alpha").value == pytest.approx(0.2)
    assert metrics(fresh) == shown


def test_a_bad_link_value_is_named_not_applied(app_env):
    at = open_capacity(app_env, {"target_violation": "7", "scale": "<b>x</b>",
                                 "dataset": "no_such_trace"})
    shown = " ".join(w.value for w in at.warning)
    assert "\\<b\\>x\\</b\\>" in shown  # user text is escaped: plain text, not Markdown
    warned = shown.replace("\\", "")
    assert "target_violation='7' is not used: it must be between 0.01 and 0.3" in warned
    assert "scale='<b>x</b>' is not used: it must be one of 1, 10, 100, 1000, 10000" in warned
    assert "Dataset no_such_trace is not in this store" in warned
    assert at.slider(key="target_violation").value == pytest.approx(0.05)  # the default


def test_save_reopen_and_compare_two_scenarios(app_env):
    at = open_capacity(app_env)
    at.text_input(key="scenario_name").set_value("base 5%").run()
    at.button(key="scenario_save").click().run()
    assert at.success[-1].value == "Saved scenario base 5%."
    at.slider(key="target_violation").set_value(0.2).run()
    at.text_input(key="scenario_name").set_value("loose 20%").run()
    at.button(key="scenario_save").click().run()
    loose = metrics(at)

    at.selectbox(key="scenario_open").set_value("base 5%").run()
    at.button(key="scenario_open_button").click().run()
    assert not at.exception
    assert at.slider(key="target_violation").value == pytest.approx(0.05)
    base = metrics(at)
    assert base["overbooking factor"] != loose["overbooking factor"]

    at.multiselect(key="scenario_pair").set_value(["base 5%", "loose 20%"]).run()
    at.button(key="scenario_compare").click().run()
    assert not at.exception
    table = table_with(at, "loose 20%")
    assert table.loc["overbooking factor"].tolist() == [base["overbooking factor"],
                                                         loose["overbooking factor"]]
    assert table.loc["target violation rate"].tolist() == ["5%", "20%"]


def test_store_keeps_named_scenarios_without_moving_the_data_version(con):
    from analytics import store

    before = store.data_version(con)
    assert store.save_scenario(con, "  peak week  ", "capacity", {"scale": "1000"}) == "peak week"
    store.save_scenario(con, "peak week", "capacity", {"scale": "100"})  # overwrite, not a copy
    store.save_scenario(con, "dispatch west", "dispatch", {"max_share": "0.4"})
    (row,) = store.scenarios(con, "capacity")
    assert row["name"] == "peak week" and row["params"] == {"scale": "100"}
    assert len(store.scenarios(con)) == 2 and store.data_version(con) == before
    for bad in ("", " ", "x" * (store.MAX_SCENARIO_NAME + 1), "tab\there"):
        with pytest.raises(ValueError, match="printable"):
            store.save_scenario(con, bad, "capacity", {})
    with pytest.raises(ValueError):
        store.save_scenario(con, "nan", "capacity", {"alpha": float("nan")})
    assert store.delete_scenario(con, "peak week") and not store.delete_scenario(con, "peak week")


def test_inputs_survive_a_visit_to_another_page_and_the_link_follows(app_env):
    """Issue 31 items 2 and 3: Capacity's violation target and Power's share are kept when the
    planner visits another page and comes back, and the link always holds the page shown (a
    page's link carries only that page's values)."""
    at = open_capacity(app_env)
    at.slider(key="target_violation").set_value(0.2).run()
    at.switch_page("pages/demand.py").run()
    assert not at.exception
    assert "target_violation" not in at.query_params  # Demand's link: Demand's values only
    at.switch_page("pages/capacity.py").run()
    assert not at.exception
    assert at.slider(key="target_violation").value == pytest.approx(0.2)
    assert at.query_params["target_violation"] == "0.2"
    # a shared envelope setting changed on one page is the one every envelope page shows
    at.switch_page("pages/demand.py").run()
    at.select_slider(key="demand_alpha").set_value(0.2).run()
    at.switch_page("pages/capacity.py").run()
    assert at.select_slider(key="capacity_alpha").value == pytest.approx(0.2)
    assert at.slider(key="target_violation").value == pytest.approx(0.2)
    seed(app_env["db"], "mit_supercloud/slurm-log-queueing-clean.csv")
    at.session_state["power_sweep_off"] = True  # the single scenario only: fast
    at.session_state["power_days"] = 1
    at.switch_page("pages/power.py").run()
    assert not at.exception
    at.slider(key="power_share").set_value(0.3).run()
    at.switch_page("pages/capacity.py").run()
    at.switch_page("pages/power.py").run()
    assert not at.exception
    assert at.slider(key="power_share").value == pytest.approx(0.3)
    assert at.query_params["power_share"] == "0.3"


def test_first_default_is_a_dense_token_trace_not_the_longest_span(app_env):
    """Issue 31 item 5: the LoRA trace spans the longest time but is GPU-seconds only and
    sparse (about 58 % of its 5-minute bins empty); the sidebar lists the dense token trace
    first and opens on it, and the LoRA trace last."""
    from analytics import store
    from analytics.services import data

    lora = "alibaba_gpu_traces/v2026_genai/lora_request_trace.csv"
    seed(app_env["db"], lora, WEEK, "azure_llm/AzureLLMInferenceTrace_conv.csv")
    con = store.connect(app_env["db"], read_only=True)
    try:
        order = data.demand_order(con)
        spans = {r["name"]: r["ts_max"] - r["ts_min"] for r in store.ledger_records(con)}
    finally:
        con.close()
    assert order[-1] == "lora_request_trace"
    assert max(spans, key=spans.get) == "lora_request_trace"  # the longest span, yet last
    assert order[0] == NAME  # a week of per-minute tokens: dense, and longer than the Azure hour
    at = new_app().run()
    assert not at.exception
    assert at.selectbox(key="dataset").value == NAME
    # issue 31 item 8: the sidebar's box cuts a long name, so it is also shown in full
    assert NAME in [c.value.replace("\\", "") for c in at.sidebar.caption]
    assert at.selectbox(key="dataset").options[-1] == "lora_request_trace"
