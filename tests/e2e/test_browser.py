"""Main flow in real headless Chromium: open the app, upload a real trace, see it listed and
charted; move the Demand and Capacity sliders and see the numbers follow. Screenshots go to
``tests/artifacts/``.

Needs Debian's ``/usr/bin/chromium`` (``CHROMIUM`` overrides). Missing browser: a failure in CI
(``CI`` set), a skip elsewhere. The ``app_url`` fixture (``conftest.py``) runs the server.
"""

from __future__ import annotations

import pytest
from harness import ARTIFACTS, browser_page, metric_box, read_metric, shared, wait_settled

pytestmark = pytest.mark.browser

WEEK = ("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv",)


def test_upload_real_trace_see_table_and_chart(app_url):
    conv = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
    with browser_page() as (sync_api, page):
        page.goto(app_url)
        page.get_by_text("No data yet").wait_for()

        page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(conv))
        ingest_button = page.get_by_role("button", name="Ingest uploaded files")
        sync_api.expect(ingest_button).to_be_enabled(timeout=60_000)
        ingest_button.click()
        page.get_by_text("19,366 rows").wait_for()
        table = page.locator('[data-testid="stDataFrame"]').filter(  # the ledger
            has_text="AzureLLMInferenceTrace_conv").first
        sync_api.expect(table).to_contain_text("AzureLLMInferenceTrace_conv")
        wait_settled(page)
        assert "AzureLLMInferenceTrace_conv" in (table.text_content() or "")
        page.screenshot(path=str(ARTIFACTS / "data_page.png"), full_page=True)

        page.get_by_role("link", name="Demand", exact=True).click()
        chart = page.locator('[data-testid="stPlotlyChart"] .main-svg').first
        chart.wait_for()
        page.get_by_text("AzureLLMInferenceTrace_conv - demand per 10s").wait_for()
        wait_settled(page)
        page.screenshot(path=str(ARTIFACTS / "demand_page.png"), full_page=True)
    assert (ARTIFACTS / "demand_page.png").stat().st_size > 10_000


@pytest.mark.parametrize("app_url", [WEEK], indirect=True)
def test_alpha_and_target_sliders_change_band_coverage_factor_and_violations(app_url):
    """One server and one browser for both pages of the same week (the Capacity page's envelope
    is the one the Demand page fitted): Capacity first, at the default alpha, then Demand."""
    with browser_page(1400) as (sync_api, page):
        page.goto(app_url)
        # st.navigation's own links (capitalised titles) replace the pages/-folder default once
        # app.py has run; wait for them as a user would before clicking
        page.get_by_role("link", name="Capacity", exact=True).click()
        page.get_by_text("overbooking factor").first.wait_for()
        wait_settled(page)
        factor_before = read_metric(page, "overbooking factor")
        viol_before = read_metric(page, "test violations")
        slider = page.get_by_role("slider", name="target SLO violation rate")
        slider.focus()
        slider.press("End")  # 5 % -> 30 %
        sync_api.expect(metric_box(page, "test violations")
                        .locator('[data-testid="stMetricDelta"]')).to_contain_text("30%")
        wait_settled(page)
        factor_after = read_metric(page, "overbooking factor")
        viol_after = read_metric(page, "test violations")
        page.screenshot(path=str(ARTIFACTS / "capacity_target_30.png"), full_page=True)

        page.get_by_role("link", name="Demand", exact=True).click()
        page.get_by_text("ACI 90% band").first.wait_for()
        wait_settled(page)
        cov_90, width_90 = read_metric(page, "ACI coverage"), read_metric(page, "mean width")
        slider = page.get_by_role("slider").first
        slider.focus()
        slider.press("ArrowRight")  # alpha 0.1 -> 0.2
        page.get_by_text("ACI 80% band").first.wait_for()
        wait_settled(page)
        cov_80, width_80 = read_metric(page, "ACI coverage"), read_metric(page, "mean width")
        page.screenshot(path=str(ARTIFACTS / "demand_alpha_0.2.png"), full_page=True)
    assert float(factor_after) < float(factor_before)
    assert int(viol_after.split("/")[0]) > int(viol_before.split("/")[0])
    assert float(cov_80.rstrip("%")) < float(cov_90.rstrip("%"))
    assert float(width_80.replace(",", "")) < float(width_90.replace(",", ""))
