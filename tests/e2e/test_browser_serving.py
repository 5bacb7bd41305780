"""Serving page in headless Chromium: move the safety margin, see energy and SLO values change."""

from __future__ import annotations

import pytest
from harness import ARTIFACTS, browser_page, read_metric, wait_metrics_change, wait_settled

pytestmark = pytest.mark.browser

FILES = ("azure_llm/AzureLLMInferenceTrace_conv.csv",
         "ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
         "llm_inference_bench_argonne/Fig_21__all_results_TTFT.csv")
ENERGY, TBT = "Festina energy", "Festina TBT attainment"


@pytest.mark.parametrize("app_url", [FILES], indirect=True)
def test_safety_margin_changes_energy_and_slo(app_url):
    with browser_page(1400) as (sync_api, page):
        page.goto(app_url)
        page.get_by_role("link", name="Serving", exact=True).click()
        page.get_by_text(ENERGY).wait_for()
        wait_settled(page)
        first = read_metric(page, ENERGY)
        window = page.get_by_role("spinbutton", name="simulate the first")
        window.fill("3")
        window.press("Enter")
        tbt = page.get_by_role("spinbutton", name="TBT SLO (ms)")
        tbt.fill("20")
        tbt.press("Enter")
        sync_api.expect(window).to_have_value("3")
        sync_api.expect(tbt).to_have_value("20")
        run = page.get_by_role("button", name="Run the simulation")
        run.click()  # the controls are a form: one run for all the changes
        wait_metrics_change(page, {ENERGY: first})  # then waits for the last rerun to finish
        before = (read_metric(page, ENERGY), read_metric(page, TBT))
        slider = page.get_by_role("slider").first
        slider.focus()
        for _ in range(20):  # 0.05 -> 0.25 in steps of 0.01
            slider.press("ArrowRight")
        thumb_value = page.locator('[data-testid="stSliderThumbValue"]').first
        sync_api.expect(thumb_value).to_have_text("0.25")
        run.click()
        wait_metrics_change(page, dict(zip((ENERGY, TBT), before, strict=True)))
        after = (read_metric(page, ENERGY), read_metric(page, TBT))
        page.screenshot(path=str(ARTIFACTS / "serving_page.png"), full_page=True)
    assert after[0] != before[0], (before, after)
    assert after[1] != before[1], (before, after)
