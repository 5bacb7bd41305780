"""Power page in headless Chromium: the sweep runs on request, then moving the inference-share
slider updates the metrics and the scenario marker on the sweep curves. Screenshot in
``tests/artifacts/power_page.png``."""

from __future__ import annotations

import pytest
from harness import ARTIFACTS, WAIT_MS, browser_page, read_metric, wait_settled

pytestmark = pytest.mark.browser
FIRST_RUN_MS = 1.5 * WAIT_MS  # 180 s by default: the first run simulates the whole job trace


@pytest.mark.parametrize("app_url", [("mit_supercloud/slurm-log-queueing-clean.csv",
                                      "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv")],
                         indirect=True)
def test_share_slider_updates_power_curves(app_url):
    with browser_page(1600) as (sync_api, page):
        page.goto(app_url + "/power?power_days=1")  # a share link: one measured day (default 7)
        sync_api.expect(page.get_by_label("measured days", exact=True)).to_have_value("1")
        # issue 31 item 6: the single scenario first; the sweep runs when asked
        run = page.get_by_role("button", name="Run the sweep")
        run.wait_for(timeout=FIRST_RUN_MS)
        run.click()
        page.get_by_text("this scenario (share 0.5)").first.wait_for(timeout=FIRST_RUN_MS)
        wait_settled(page, timeout=FIRST_RUN_MS)
        cv_before = read_metric(page, "CV of total power")
        ramp_before = read_metric(page, "p50 ramp 15min")
        slider = page.get_by_role("slider", name="inference share")
        slider.focus()
        for _ in range(4):  # 0.5 -> 0.7 in steps of 0.05
            slider.press("ArrowRight")
        page.get_by_text("this scenario (share 0.7)").first.wait_for()
        wait_settled(page)
        cv_after = read_metric(page, "CV of total power")
        ramp_after = read_metric(page, "p50 ramp 15min")
        page.screenshot(path=str(ARTIFACTS / "power_page.png"), full_page=True)
    assert (cv_after, ramp_after) != (cv_before, ramp_before)
    assert (ARTIFACTS / "power_page.png").stat().st_size > 10_000
