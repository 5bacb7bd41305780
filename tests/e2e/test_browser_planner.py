"""Issue 31, done-when: a planner's second afternoon in real headless Chromium.

A fresh server on an empty store and an empty data folder (the first-run bootstrap finds
nothing); the Data page's synthetic demo; every page opened without touching a widget answers
(a chart labelled synthetic, or the page's own next step); inputs changed on Capacity, Power and
Serving survive a visit to another page; the link copied after a refusal reopens that refusal;
a finished Serving run offers no control that can discard it. Screenshots of each page go to
``tests/artifacts/planner_*.png`` (``docs/screenshots/`` is refreshed from them).
"""

from __future__ import annotations

import pytest
from harness import ARTIFACTS, browser_page, read_metric, wait_settled

from analytics.ui.charts import SYNTHETIC_LABEL

pytestmark = pytest.mark.browser

#: page link -> text its first answer shows (a chart's page waits for the chart as well)
PAGES = {"Demand": "Forecast and demand envelope", "Coverage": "Shift alarm",
         "Capacity": "overbooking factor", "Dispatch": "tCO2e, carbon-aware",
         "Placement": "Fit the cost model", "Power": "CV of total power",
         "Serving": "Festina energy", "Telemetry": "Energy in the window, per GPU",
         "Live": "No live run is stored yet", "Sweeps": "Delete this sweep"}
#: pages whose answer is a next step, not a chart of the demo
NO_CHART = ("Live", "Sweeps")


def _open(page, link: str, ready: str) -> None:
    page.get_by_role("link", name=link, exact=True).click()
    page.get_by_text(ready).first.wait_for()
    wait_settled(page)
    assert page.locator('[data-testid="stException"]').count() == 0, link


def _slider_value(page, name: str) -> str:
    """The value a slider shows on its thumb."""
    return (page.get_by_test_id("stSlider").filter(has_text=name)
            .get_by_test_id("stSliderThumbValue").first.inner_text())


def test_planner_demo_every_page_kept_inputs_refusal_link_and_a_kept_serving_run(app_url):
    with browser_page(1400) as (sync_api, page):
        page.goto(app_url)
        page.get_by_role("button", name="Load synthetic demo").click()
        page.get_by_text("synthetic_demo_telemetry").first.wait_for()  # the ingest report
        wait_settled(page)

        # every page answers without a widget touched, each chart says SYNTHETIC
        for link, ready in PAGES.items():
            _open(page, link, ready)
            if link not in NO_CHART:
                page.locator('[data-testid="stPlotlyChart"]').first.wait_for()
                page.get_by_text(SYNTHETIC_LABEL).first.wait_for()
            page.screenshot(path=str(ARTIFACTS / f"planner_{link.lower()}.png"), full_page=True)

        # Capacity: an input of the planner's own survives a visit to Demand
        _open(page, "Capacity", "overbooking factor")
        slider = page.get_by_role("slider", name="target SLO violation rate")
        slider.focus()
        slider.press("End")  # 5 % -> 30 %
        page.wait_for_url("**target_violation=0.3*")
        wait_settled(page)
        factor = read_metric(page, "overbooking factor")
        shown = _slider_value(page, "target SLO violation rate")
        assert shown != "5%", shown
        _open(page, "Demand", "Forecast and demand envelope")
        _open(page, "Capacity", "overbooking factor")
        assert _slider_value(page, "target SLO violation rate") == shown
        assert "target_violation=0.3" in page.url
        assert read_metric(page, "overbooking factor") == factor

        # Power: the inference share
        _open(page, "Power", "CV of total power")
        share = page.get_by_role("slider", name="inference share")
        before = _slider_value(page, "inference share")
        share.focus()
        share.press("ArrowRight")
        share.press("ArrowRight")
        page.wait_for_function(
            """([name, before]) => [...document.querySelectorAll('[data-testid="stSlider"]')]
                 .some(s => s.innerText.includes(name) && !s.innerText.includes(before))""",
            arg=["inference share", before])
        wait_settled(page)
        kept = _slider_value(page, "inference share")
        _open(page, "Telemetry", "Energy in the window, per GPU")
        _open(page, "Power", "CV of total power")
        assert _slider_value(page, "inference share") == kept

        # Serving: a pool of 4 GPUs, run; no control on the finished result can discard it
        _open(page, "Serving", "Festina energy")
        gpus = page.get_by_role("spinbutton", name="GPUs in the pool")
        gpus.fill("4")
        gpus.press("Enter")
        first = read_metric(page, "Festina energy")
        page.get_by_role("button", name="Run the simulation").click()
        page.wait_for_function(
            """([label, before]) => [...document.querySelectorAll('[data-testid="stMetric"]')]
                 .some(m => m.innerText.includes(label) && !m.innerText.includes(before))""",
            arg=["Festina energy", first])
        wait_settled(page)
        result = read_metric(page, "Festina energy")
        charts = page.locator('[data-testid="stPlotlyChart"]').count()
        assert page.get_by_role("button", name="Cancel").count() == 0
        # an input outside the form reruns the page: the finished run stays on screen
        target = page.get_by_role("spinbutton", name="SLO attainment target")
        target.fill("0.95")
        target.press("Enter")
        sync_api.expect(target).to_have_value("0.95")
        wait_settled(page)
        assert page.get_by_text("Simulation cancelled").count() == 0
        assert read_metric(page, "Festina energy") == result
        assert page.locator('[data-testid="stPlotlyChart"]').count() == charts
        _open(page, "Demand", "Forecast and demand envelope")
        _open(page, "Serving", "Festina energy")
        sync_api.expect(page.get_by_role("spinbutton", name="GPUs in the pool")).to_have_value("4")
        assert read_metric(page, "Festina energy") == result

        # Dispatch: a refusal, then its link in a fresh browser shows the same refusal
        _open(page, "Dispatch", "tCO2e, carbon-aware")
        cap = page.get_by_role("slider", name="max share of an hour per site")
        cap.focus()
        cap.press("Home")  # 3 sites x 10 % cannot carry the demand
        refusal = page.get_by_text("cannot carry the whole demand")
        refusal.wait_for()
        wait_settled(page)
        page.wait_for_url("**max_share=0.1*")
        link = page.url
        fresh = page.context.browser.new_context(viewport={"width": 1400, "height": 1400})
        other = fresh.new_page()
        other.goto(link)
        other.get_by_text("cannot carry the whole demand").wait_for()
        wait_settled(other)
        assert _slider_value(other, "max share of an hour per site") == "0.10"
        fresh.close()
