"""Power page in headless Chromium: moving the inference-share slider updates the metrics and
the scenario marker on the sweep curves. Screenshot in ``tests/artifacts/power_page.png``."""

from __future__ import annotations

import pytest

from e2e import test_browser as tb

pytestmark = pytest.mark.browser
app_url = tb.app_url  # the fixture: a Streamlit server on a store seeded with staged files
ARTIFACTS, _metric, _page = tb.ARTIFACTS, tb._metric, tb._page


@pytest.mark.parametrize("app_url", [("mit_supercloud/slurm-log-queueing-clean.csv",
                                      "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")],
                         indirect=True)
def test_share_slider_updates_power_curves(app_url):
    with _page(1600) as (sync_api, page):
        page.goto(app_url)
        page.get_by_role("link", name="Power", exact=True).click()
        page.get_by_text("this scenario (share 0.5)").first.wait_for(timeout=180_000)
        cv_before = _metric(page, "CV of total power")
        ramp_before = _metric(page, "p50 ramp 15min")
        slider = page.get_by_role("slider", name="inference share")
        slider.focus()
        for _ in range(4):  # 0.5 -> 0.7 in steps of 0.05
            slider.press("ArrowRight")
        page.get_by_text("this scenario (share 0.7)").first.wait_for()
        page.wait_for_timeout(1000)
        cv_after = _metric(page, "CV of total power")
        ramp_after = _metric(page, "p50 ramp 15min")
        page.screenshot(path=str(ARTIFACTS / "power_page.png"), full_page=True)
    assert (cv_after, ramp_after) != (cv_before, ramp_before)
    assert (ARTIFACTS / "power_page.png").stat().st_size > 10_000
