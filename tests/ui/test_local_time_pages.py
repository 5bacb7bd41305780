"""Issue 14 item 2 on the pages: the Data page's time-zone field converts sacct local times and
the ledger shows the zone; the Power page names the job a zone-less ingest leaves out."""

from __future__ import annotations

from conftest import SHARED_DATA
from harness import missing, new_app, table_with

from analytics import store
from analytics.ingest import files as ingest

CASE = SHARED_DATA.parent / "cases" / "22-sacct-dst-local-times.txt"


def _case_bytes() -> bytes:
    if not CASE.exists():
        missing(CASE)
    return CASE.read_bytes()


def test_data_page_time_zone_field_goes_to_the_ledger(app_env):
    data = _case_bytes()
    at = new_app().run()
    at.file_uploader(key="uploads").set_value((CASE.name, data, "text/plain"))
    at.selectbox(key="tz").set_value("America/New_York")
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    ledger = table_with(at, "name")
    row = ledger[ledger["name"] == "22-sacct-dst-local-times"].iloc[0]
    assert row["source_tz"] == "America/New_York" and row["rows"] == 12
    report = " ".join(str(d.value.to_dict()) for d in at.dataframe)
    assert "later instant" in report  # the ingest report names line 3's End


def test_power_page_names_the_job_left_out(app_env):
    _case_bytes()
    con = store.connect(app_env["db"])
    try:
        ingest.ingest_files(con, [ingest.FileIn(CASE, CASE.name)])  # no zone: 8001 ends early
    finally:
        con.close()
    at = new_app().run()
    at.session_state["power_days"] = 1  # the left-out job is named whatever the length
    # the warning and table come with the scenario's run, before the share sweep (44 more
    # simulations, tested in test_power_page.py): the sweep is cancelled, as its button would
    at.session_state["power_sweep_cancelled"] = True
    at.switch_page("pages/power.py").run()
    assert not at.exception
    assert "Sweep cancelled." in [i.value for i in at.info]
    assert any("1 GPU job(s)" in w.value and "11 used" in w.value for w in at.warning)
    left = table_with(at, "reason")
    assert left["job_id"].tolist() == ["8001"]
    assert "End before Start" in left["reason"].iloc[0]
