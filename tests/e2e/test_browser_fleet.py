"""The Fleet plan flow in real headless Chromium (issue 30 item 5): the BurstGPT week as demand,
the ML.ENERGY v3 sweeps as capacity; pick the model, state the ITL limit, raise the stated risk
and see the planned GPU-hours fall; download the Kubernetes + KEDA file and parse it.
Screenshot: ``tests/artifacts/fleet_plan.png`` (the README's ``docs/screenshot-fleet.png``)."""

from __future__ import annotations

import pytest
import yaml
from harness import ARTIFACTS, browser_page, read_metric, wait_metrics_change, wait_settled

pytestmark = pytest.mark.browser

FILES = ("ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
         "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv",
         "burstgpt/BurstGPT_1_head400.csv")


@pytest.mark.parametrize("app_url", [FILES], indirect=True)
def test_plan_the_week_raise_the_risk_and_download_the_keda_file(app_url):
    with browser_page(1400) as (sync_api, page):
        page.goto(app_url)
        page.get_by_role("link", name="Fleet plan", exact=True).click()
        model = page.get_by_role("combobox", name="model (benchmark task)")
        model.click()
        model.fill("Qwen/Qwen3-14B (lm-arena-chat")
        model.press("Enter")
        itl = page.get_by_role("spinbutton", name="ITL p99 limit (ms; 0 = none)")
        itl.fill("80")
        itl.press("Enter")
        page.get_by_text("backtest: short bins").first.wait_for()
        wait_settled(page)
        assert read_metric(page, "arm") == "H100-80GB"  # at the default 1000x traffic
        before = {k: read_metric(page, k) for k in ("GPU-hours planned",)}
        slider = page.get_by_role("slider", name="stated risk (share of bins short)")
        slider.focus()
        for _ in range(10):  # 5 % -> 15 %
            slider.press("ArrowRight")
        wait_metrics_change(page, before)
        after = read_metric(page, "GPU-hours planned")
        # a higher stated risk: a smaller certified demand, fewer GPU-hours
        assert float(after.replace(",", "")) < float(before["GPU-hours planned"].replace(",", ""))
        page.screenshot(path=str(ARTIFACTS / "fleet_plan.png"), full_page=True)
        with page.expect_download() as download:
            page.get_by_role("button", name="Kubernetes Deployment + KEDA ScaledObject").click()
        deployment, scaled = yaml.safe_load_all(download.value.path().read_text())
        body = page.locator("body").text_content() or ""
    assert deployment["kind"] == "Deployment" and scaled["kind"] == "ScaledObject"
    assert scaled["spec"]["triggers"] and "Traceback" not in body
