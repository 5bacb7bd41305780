"""Every page renders; upload -> dataset -> Demand chart works through AppTest."""

from __future__ import annotations

import base64
import json
from datetime import datetime

import numpy as np
import pytest
from harness import metrics, new_app, seed, shared, strict_loads, table_with

WEEK = "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"


@pytest.mark.parametrize("page", ["pages/data.py", "pages/demand.py", "pages/coverage.py",
                                  "pages/capacity.py", "pages/dispatch.py",
                                  "pages/telemetry.py", "pages/live.py", "pages/fleet.py",
                                  "pages/leaderboard.py"])
def test_every_page_renders_on_empty_store(app_env, page):
    at = new_app().run()
    at.switch_page(page).run()
    assert not at.exception
    assert at.title[0].value == {"pages/data.py": "Data", "pages/demand.py": "Demand",
                                 "pages/coverage.py": "Coverage",
                                 "pages/capacity.py": "Capacity",
                                 "pages/dispatch.py": "Dispatch",
                                 "pages/telemetry.py": "Telemetry",
                                 "pages/live.py": "Live", "pages/fleet.py": "Fleet plan",
                                 "pages/leaderboard.py": "Leaderboard"}[page]


def test_empty_store_says_how_to_get_data_and_offers_demo(app_env):
    at = new_app().run()
    assert "No data yet" in at.info[0].value
    assert "headroom pull" in at.info[0].value
    at.button(key="demo").click().run()
    assert not at.exception
    assert at.sidebar.selectbox(key="dataset").value == "synthetic_demo_14d"
    assert any("Synthetic" in w.value for w in at.sidebar.warning)
    at.switch_page("pages/demand.py").run()
    assert not at.exception
    fig = at.get("plotly_chart")[0].proto.spec
    assert "SYNTHETIC DATA" in fig


def test_upload_azure_conv_adds_dataset_and_demand_page_charts_it(app_env):
    data = shared("azure_llm/AzureLLMInferenceTrace_conv.csv").read_bytes()
    at = new_app().run()
    at.file_uploader(key="uploads").set_value(("AzureLLMInferenceTrace_conv.csv", data, "text/csv"))
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    assert "19,366 rows" in at.success[0].value
    ledger = table_with(at, "name")
    row = ledger[ledger["name"] == "AzureLLMInferenceTrace_conv"].iloc[0]
    assert row["rows"] == 19366 and row["format"] == "azure_llm"
    assert at.sidebar.selectbox(key="dataset").value == "AzureLLMInferenceTrace_conv"

    at.switch_page("pages/demand.py").run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 2  # demand and envelope
    shown = metrics(at)  # issue 19 item 3: the default bin is one an envelope calibrates on
    assert at.selectbox(key="bin").value == "10s" and shown["bins"] == "351"
    assert shown["requests"] == "19,366" and "coverage" in " ".join(shown)
    at.selectbox(key="bin").set_value("1min").run()
    assert metrics(at)["bins"] == "60"  # 18:15 .. 19:14 inclusive


def test_bin_choice_is_shared_across_pages(app_env):
    """Issue 19 item 4: the bin follows the user from page to page, like alpha and the model."""
    seed(app_env["db"], WEEK)
    at = new_app().run()
    at.switch_page("pages/demand.py").run()
    assert at.selectbox(key="bin").value == "5min"
    at.selectbox(key="bin").set_value("1h").run()
    at.switch_page("pages/coverage.py").run()
    assert not at.exception
    assert at.selectbox(key="coverage_bin").value == "1h"
    assert "1d" not in at.selectbox(key="coverage_bin").options  # 7 bins cannot calibrate
    at.switch_page("pages/demand.py").run()
    assert at.selectbox(key="bin").value == "1h" and metrics(at)["bins"] == "168"


def test_one_hour_trace_gets_a_bin_that_can_calibrate(app_env):
    """Issue 19 item 3: the README's one-hour Azure trace used to fail at the default 5 minutes
    ("only 2 calibration bins"); envelope pages now offer only bins with enough calibration
    bins, say why 5 minutes is not among them, and show an envelope."""
    seed(app_env["db"], "azure_llm/AzureLLMInferenceTrace_conv.csv")
    at = new_app().run()
    at.switch_page("pages/coverage.py").run()
    assert not at.exception
    assert at.selectbox(key="coverage_bin").options == ["10s"]
    assert any("5 min would give 12" in c.value for c in at.caption)
    assert not at.error and len(at.get("plotly_chart")) >= 1


def test_upload_bad_file_shows_error_and_store_is_unchanged(app_env):
    from analytics import store

    at = new_app().run()
    bad = b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,12,4\n2023-11-16 18:15:47.1,x,3\n"
    at.file_uploader(key="uploads").set_value(("bad.csv", bad, "text/csv"))
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    assert "line 3, column ContextTokens" in at.error[0].value
    con = store.connect(app_env["db"], read_only=False)
    try:
        assert store.table_counts(con)["datasets"] == 0
    finally:
        con.close()


def test_demand_page_refuses_finer_bins_than_the_per_minute_aggregate(app_env):
    seed(app_env["db"], WEEK)
    at = new_app().run()
    at.switch_page("pages/demand.py").run()
    assert not at.exception
    assert at.selectbox(key="bin").options[0] == "1min"
    assert metrics(at)["requests"] == "not in data"
    assert metrics(at)["bins"] == "2,016"


def test_demand_page_envelope_matches_cli_numbers(app_env, capsys):

    from analytics import cli

    seed(app_env["db"], WEEK)
    at = new_app().run()
    at.switch_page("pages/demand.py").run()
    assert not at.exception
    shown = metrics(at)
    capsys.readouterr()
    # in-process: the app's cached connection holds the DuckDB file's write lock
    # the page's point model is "auto" (issue 31 item 5: the lowest calibration WAPE)
    assert cli.main(["--db", str(app_env["db"]), "envelope", "burstgpt1_week1_per_minute_tps",
                     "--base-model", "auto"]) == 0
    doc = strict_loads(capsys.readouterr().out)
    assert doc["cache"] == "hit"  # the page's fit, read back from the disk cache beside the store
    chosen = doc["base_model_choice"]["chosen"]
    assert chosen == "extra_trees"  # 35.6 % calibration WAPE on the week; hgb 39.8 %
    said = [c.value for c in at.caption if c.value.startswith("Point model under the intervals")]
    assert len(said) == 1 and "extra\\_trees: the lowest WAPE on the calibration window" in said[0]
    assert shown["ACI coverage"] == f"{doc['intervals']['aci']['coverage']:.1%}"
    assert shown["mean width"] == f"{doc['intervals']['aci']['mean_width']:,.0f}"
    table = at.dataframe[0].value
    hgb = table[table["model"] == "hgb"].iloc[0]
    assert hgb["WAPE %"] == pytest.approx(doc["point"]["hgb"]["wape"] * 100)
    # the MAE-gain sentence states the CLI's block length and its rule (issue 18 item 8)
    gain = doc["mae_gain_ci"]
    text = " ".join(m.value for m in at.markdown)
    assert f"blocks of {gain['block_bins']} bins" in text and "Politis-White" in text
    assert f"{gain['n_blocks']} whole blocks" in text and gain["warning"] is None


def test_coverage_page_shows_every_method(app_env):
    seed(app_env["db"], WEEK)
    at = new_app().run()
    at.switch_page("pages/coverage.py").run()
    assert not at.exception
    assert at.title[0].value == "Coverage"
    table = at.dataframe[0].value
    assert set(table["method"]) == {"direct quantile", "split conformal", "CQR",
                                    "rolling conformal", "ACI", "regime (Mondrian)"}
    assert table["coverage"].between(0, 1).all() and (table["mean width"] > 0).all()
    # issue 31 item 9: a method far under its nominal coverage is flagged, one close is not
    cov = table.set_index("method")["coverage"]
    flagged = [w.value for w in at.warning if "under-covers" in w.value]
    assert cov["direct quantile"] < 0.8 and len(flagged) == 1
    assert flagged[0].startswith("direct quantile under-covers: ") and "of the 323 test bins" \
        in flagged[0]
    regimes = next(d.value for d in at.dataframe if {"ACI", "bins"} <= set(d.value.columns))
    assert regimes["bins"].sum() == 323 and regimes["ACI"].between(0, 1).all()
    # issue 15: the first chart (the split windows, no fit) comes before the envelope's four
    charts = at.get("plotly_chart")
    assert len(charts) == 5 and "fit, calibration and test windows" in charts[0].proto.spec
    before = table.set_index("method")["mean width"]
    at.select_slider(key="coverage_alpha").set_value(0.2).run()
    after = at.dataframe[0].value.set_index("method")["mean width"]
    assert (after < before).all()


def test_lora_trace_uses_gpu_seconds_and_cold_start_section(app_env):
    seed(app_env["db"], "azure_llm/AzureLLMInferenceTrace_conv.csv")  # one hour: a poor source
    seed(app_env["db"], WEEK)
    seed(app_env["db"], "alibaba_gpu_traces/v2026_genai/lora_request_trace.csv")
    at = new_app().run()
    at.sidebar.selectbox(key="dataset").set_value("lora_request_trace").run()
    at.switch_page("pages/demand.py").run()
    assert not at.exception
    assert any("GPU-seconds" in c.value for c in at.caption)
    assert "mean GPU-seconds / 5min" in [m.label for m in at.metric]
    at.switch_page("pages/coverage.py").run()
    assert not at.exception
    # issue 19 item 15, 31 item 9: the cold-start source defaults to the best other trace (a
    # dense token trace, the longest of them), not the first or the one-hour Azure trace
    assert at.selectbox(key="cold_source").value == "burstgpt1_week1_per_minute_tps"
    assert not [d for d in at.dataframe if "source_calibrated" in set(d.value.get("method", []))]
    at.toggle(key="cold_on").set_value(True).run()  # slow work runs when asked (issue 31)
    assert not at.exception
    cold = at.dataframe[-1].value
    assert set(cold["method"]) == {"source_calibrated", "split", "aci"}
    aci = cold[cold["method"] == "aci"]["coverage"]
    assert aci.between(0.85, 0.95).all()


def test_first_run_ingests_recognised_files_in_the_data_folder(app_env):
    import shutil

    for rel in ("azure_llm/AzureLLMInferenceTrace_code.csv", "burstgpt/BurstGPT_1_head400.csv"):
        shutil.copy(shared(rel), app_env["raw"])
    (app_env["raw"] / "notes.txt").write_text("not a trace\n")
    at = new_app().run()
    assert not at.exception
    ledger = table_with(at, "name").set_index("name")
    assert ledger.loc["AzureLLMInferenceTrace_code", "rows"] == 8819
    assert ledger.loc["BurstGPT_1_head400", "rows"] == 400
    assert len(ledger) == 2  # notes.txt was not recognised and is left alone
    assert "2 ingested, 0 duplicate, 0 skipped by design, 0 rejected" in at.markdown[0].value
    warned = table_with(at, "warning")
    assert any("17 failed requests" in w for w in warned["warning"])


def _values(v) -> np.ndarray:
    """A Plotly JSON array: a list, or numpy's typed-array form ``{"dtype", "bdata"}``."""
    if isinstance(v, dict):
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
    return np.asarray(v)


def test_capacity_page_factor_moves_with_the_target(app_env):
    seed(app_env["db"], WEEK)
    at = new_app().run()
    at.switch_page("pages/capacity.py").run()
    assert not at.exception and at.title[0].value == "Capacity"
    before = metrics(at)
    at.slider(key="target_violation").set_value(0.2).run()
    after = metrics(at)
    assert float(after["overbooking factor"]) < float(before["overbooking factor"])
    assert int(after["test violations"].split("/")[0]) > int(before["test violations"].split("/")[0])
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(charts) == 4  # issue 15: the split windows first (no fit), then the plan's three
    assert charts[0]["layout"]["title"]["text"].endswith("fit, calibration and test windows")
    # issue 18 item 9: the factor / violation trade-off curve, the LTT bound and the chosen f
    assert "Factor / violation trade-off" in [h.value for h in at.subheader]
    (curve,) = [c for c in charts
                if c["layout"].get("xaxis", {}).get("title", {}).get("text") ==
                "overbooking factor f"]
    traces = {t["name"]: t for t in curve["data"]}
    assert {"calibration (empirical)", "test", "LTT bound (calibration)"} <= set(traces)
    factor = float(after["overbooking factor"])
    assert _values(traces[f"chosen f = {factor:.2f}"]["x"]).tolist() == [factor]
    x, bound = (_values(traces["LTT bound (calibration)"][k]) for k in ("x", "y"))
    assert x[0] == 0.5 and x[-1] == 2.0 and (np.diff(bound) <= 0).all()
    assert any("target 20%" in str(a.get("text")) for a in curve["layout"]["annotations"])


def test_dispatch_page_with_real_sites(app_env):
    seed(app_env["db"], WEEK)
    seed(app_env["db"], *(f"sustaindc_dcrl/CarbonIntensity/{ba}_NG_&_avgCI.csv"
                          for ba in ("CISO", "ERCO", "BPAT")))
    at = new_app().run()
    at.switch_page("pages/dispatch.py").run()
    assert not at.exception and at.title[0].value == "Dispatch"
    m = {x.label: float(x.value.split()[0]) for x in at.metric}
    assert m["tCO2e, carbon-aware"] < m["tCO2e, all at home"]
    assert m["tCO2e, carbon-aware"] < m["tCO2e, capacity-proportional"]
    assert any("no weather" in c.value for c in at.caption)


def test_telemetry_page_without_driver_and_with_dcgm_upload(app_env):
    from analytics import telemetry
    from tests.ingest.test_telemetry_formats import DCGM  # the DCGM scrape sample lives there

    at = new_app().run()
    at.switch_page("pages/telemetry.py").run()
    assert not at.exception and at.title[0].value == "Telemetry"
    if not telemetry.status()["available"]:
        assert "no NVIDIA driver" in at.info[0].value
    at.switch_page("pages/data.py").run()
    at.file_uploader(key="uploads").set_value([
        ("scrape.prom", DCGM.encode(), "text/plain"),
        ("acme_power_util_cdf.csv", shared("acmetrace/acme_power_util_cdf.csv").read_bytes(),
         "text/csv")])
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception and len(at.success) == 2
    at.switch_page("pages/telemetry.py").run()
    assert not at.exception
    table = at.dataframe[0].value
    g0 = table[table["gpu_id"] == 0].set_index("metric")
    assert g0.loc["power_w", "window"] >= g0.loc["power_w", "whole"], at.slider(key="win").value
    assert len(at.get("plotly_chart")) == 2


def test_first_run_reports_a_bad_file_and_keeps_the_good_one(app_env):
    import shutil

    shutil.copy(shared("azure_llm/AzureLLMInferenceTrace_code.csv"), app_env["raw"])
    (app_env["raw"] / "broken.csv").write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "inf,ChatGPT,1,1,2,API log\n")
    at = new_app().run()
    assert not at.exception
    assert "line 2, column Timestamp" in at.error[0].value
    assert table_with(at, "name")["name"].tolist() == ["AzureLLMInferenceTrace_code"]


def test_telemetry_page_live_chart_with_a_gpu(app_env, monkeypatch):
    from test_telemetry import FakeNVML

    from analytics import nvml

    fake = FakeNVML()
    monkeypatch.setattr(nvml, "_nvml", lambda: fake)
    at = new_app().run()
    at.switch_page("pages/telemetry.py").run()
    assert not at.exception
    assert "NVML sees 2 GPU(s)" in at.success[0].value
    assert len(at.get("plotly_chart")) == 1  # the live power chart of the fragment


def test_telemetry_window_from_a_vllm_bench_result(app_env):
    import json

    from analytics import store
    from analytics.ingest import files as ingest
    from tests.ingest.test_telemetry_formats import DCGM  # the DCGM scrape sample lives there

    con = store.connect(app_env["db"])
    path = app_env["raw"].parent / "scrape.prom"
    path.write_text(DCGM)
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    con.close()
    at = new_app().run()
    at.switch_page("pages/telemetry.py").run()
    result = {"date": "20240510-120100", "duration": 60.0, "completed": 10}
    at.file_uploader(key="vllm_result").set_value(
        ("bench.json", json.dumps(result).encode(), "application/json"))
    at.run()
    assert not at.exception
    assert at.slider(key="win").value == (datetime(2024, 5, 10, 12, 0),
                                          datetime(2024, 5, 10, 12, 1))
    g0 = at.dataframe[0].value.query("gpu_id == 0").set_index("metric")
    assert g0.loc["power_w", "window"] == pytest.approx(132.5)  # only the 12:00 sample is in


def test_an_unexpected_page_error_shows_an_id_not_a_traceback(app_env, monkeypatch, caplog):
    """Issue 16 item 11: users get a short message with an error id; the details (and server
    paths) go to the server log under that id. ``HEADROOM_DEBUG`` (set for the other tests)
    lets the error through instead."""
    from analytics.ui import cache

    def broken(*args, **kwargs):
        raise RuntimeError("secret detail at /srv/headroom/data")

    monkeypatch.delenv("HEADROOM_DEBUG")
    monkeypatch.setattr(cache, "datasets", broken)
    at = new_app().run()
    assert not at.exception
    (message,) = [e.value for e in at.error]
    assert "error id" in message and "/srv" not in message and "secret" not in message
    error_id = message.split("error id ")[1][:8]
    assert any(error_id in r.getMessage() and r.exc_info for r in caplog.records)
    monkeypatch.setenv("HEADROOM_DEBUG", "1")
    assert "secret detail" in str(new_app().run().exception[0].value)


def test_user_strings_are_plain_text_and_names_safe(app_env):
    """Issue 16 item 10: a file name with Markdown (an image that would fetch a URL) is shown
    escaped, and the dataset it makes gets a name from the safe character set."""
    trace = shared("azure_llm/AzureLLMInferenceTrace_code.csv").read_bytes()
    evil = "![x](http://example.invalid/p.png) code.csv"
    at = new_app().run()
    at.file_uploader(key="uploads").set_value([(evil, trace, "text/csv"),
                                               ("bad [y](http://e.invalid).csv", b"a,b\n1,2\n",
                                                "text/csv")])
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    assert "!\\[x\\](http://example.invalid/p.png) code.csv" in at.success[0].value
    # the name is the file's stem (after its last '/') in the safe character set
    assert "dataset p.png_code" in at.success[0].value.replace("\\_", "_")
    assert "bad \\[y\\](http://e.invalid).csv" in at.error[0].value
    assert table_with(at, "name")["name"].tolist() == ["p.png_code"]


def test_cli_refuses_an_unsafe_dataset_name(tmp_path, capsys):
    from analytics import cli

    path = shared("azure_llm/AzureLLMInferenceTrace_code.csv")
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--db", str(tmp_path / "s.duckdb"), "ingest", str(path),
                  "--name", "![x](http://e.invalid/p.png)"])
    assert exit_.value.code == 2 and "is not allowed" in capsys.readouterr().err


def test_delete_asks_first_and_says_it_is_done_and_the_uploader_clears(app_env):
    """Issue 19 item 14: delete needs a confirmation and reports what it did; after an ingest
    the uploader is empty, so the next Ingest does not resend the same files."""
    data = shared("azure_llm/AzureLLMInferenceTrace_code.csv").read_bytes()
    at = new_app().run()
    at.file_uploader(key="uploads").set_value(("AzureLLMInferenceTrace_code.csv", data,
                                               "text/csv"))
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    assert at.button(key="ingest").disabled  # the uploader under its new key is empty
    at.button(key="delete").click().run()
    assert "8,819 rows" in at.warning[0].value and "cannot be undone" in at.warning[0].value
    assert table_with(at, "name")["name"].tolist() == ["AzureLLMInferenceTrace_code"]
    at.button(key="delete_cancel").click().run()
    assert not at.warning and table_with(at, "name")["name"].tolist() == [
        "AzureLLMInferenceTrace_code"]
    at.button(key="delete").click().run()
    at.button(key="delete_confirm").click().run()
    assert not at.exception
    assert any("Deleted dataset AzureLLMInferenceTrace\\_code" in s.value for s in at.success)
    assert "No data yet" in at.info[0].value


def test_multi_file_upload_selects_the_longest_demand_trace(app_env):
    """Issue 19 item 3: after an upload of several files the sidebar selects the demand dataset
    with the longest span (enough calibration bins), not the last file."""
    week = shared(WEEK)
    conv = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
    at = new_app().run()
    at.file_uploader(key="uploads").set_value([
        (week.name, week.read_bytes(), "text/csv"), (conv.name, conv.read_bytes(), "text/csv")])
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception and len(at.success) == 2
    assert at.sidebar.selectbox(key="dataset").value == "burstgpt1_week1_per_minute_tps"
