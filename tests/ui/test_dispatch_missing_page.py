"""Issue 14 item 12 on the Dispatch page: missing site hours are named before any fitting, and a
fill method chosen on the page gives numbers and says how many hours were filled where."""

from __future__ import annotations

from harness import new_app, seed, table_with

from tests.ingest.test_carbon_hourly import sustaindc_with_gaps

WEEK = "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"


def test_dispatch_page_names_missing_hours_then_fills_them(app_env, tmp_path):
    seed(app_env["db"], WEEK, str(sustaindc_with_gaps(tmp_path)),
         "sustaindc_dcrl/CarbonIntensity/ERCO_NG_&_avgCI.csv",
         "sustaindc_dcrl/CarbonIntensity/BPAT_NG_&_avgCI.csv")
    at = new_app().run()
    at.switch_page("pages/dispatch.py").run()
    assert not at.exception and at.title[0].value == "Dispatch"
    assert at.selectbox(key="fill_missing").value == "refuse and name them"
    err = at.error[0].value.replace("\\", "")  # shown as plain text: Markdown escaped
    assert ("CISO: 3 trace hours without carbon intensity: 2023-01-08 05:00, 2023-01-08 06:00, "
            "2023-01-08 07:00") in err
    assert "Nothing was fitted" in err
    assert "--fill-missing" not in err  # the page names its own control, not a CLI flag
    assert "missing site hours" in at.info[0].value
    assert not at.metric

    at.selectbox(key="fill_missing").set_value("interpolate").run()
    assert not at.exception and not at.error
    m = {x.label: float(x.value.split()[0]) for x in at.metric}
    assert m["tCO2e, carbon-aware"] < m["tCO2e, all at home"]
    assert "CISO carbon intensity: 3 hours by interpolate" in at.warning[0].value.replace("\\", "")
    filled = table_with(at, "hours")
    assert filled[["site", "series", "hours", "method"]].values.tolist() == [
        ["CISO", "carbon_intensity", 3, "interpolate"]]


def test_data_page_carbon_basis_choice(app_env):
    from tests.ingest.test_carbon_hourly import NEW_HEADER, NEW_ROWS

    data = ("\n".join([NEW_HEADER, *NEW_ROWS]) + "\n").encode()
    at = new_app().run()
    at.file_uploader(key="uploads").set_value(("SE_2021_hourly.csv", data, "text/csv"))
    at.run()
    at.selectbox(key="carbon_basis").set_value("direct").run()
    at.button(key="ingest").click().run()
    assert not at.exception
    ledger = table_with(at, "name")
    row = ledger[ledger["name"] == "SE_2021_hourly"].iloc[0]
    assert row["rows"] == 2 and row["format"] == "greendcc_carbon"
