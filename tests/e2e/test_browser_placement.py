"""Placement in real headless Chromium: fit the cost model when asked, submit a launch request,
see the ranked arms."""

from __future__ import annotations

import pytest
from harness import ARTIFACTS, browser_page, read_metric, wait_settled

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("app_url", [("ml_energy/leaderboard_v2/llm_text_generation_runs.csv",
                                      "mit_supercloud/slurm-log-queueing-clean.csv")],
                         indirect=True)
def test_submit_request_and_see_ranked_arms(app_url):
    with browser_page(1600) as (_, page):
        page.goto(app_url)
        page.get_by_role("link", name="Placement", exact=True).click()
        # issue 31 item 6: the fit runs when asked, unless one is stored for this data
        fit = page.get_by_role("button", name="Fit the cost model")
        arms = page.get_by_text("Arms: output throughput q50").first  # the chart title
        fit.or_(arms).first.wait_for()
        if fit.is_visible():
            fit.click()
        arms.wait_for()
        wait_settled(page)
        before = read_metric(page, "ranked arms")
        assert int(before) > 0
        conc = page.get_by_label("concurrency")
        conc.fill("4096")
        inp = page.get_by_label("input tokens")
        inp.fill("200000")
        page.get_by_role("button", name="Rank arms").click()
        # one 200k-token sequence (26 GB of KV cache for 8B) does not fit beside the weights of
        # a single 40 GB GPU: those arms are infeasible (a long queue alone only caps the
        # concurrency, as vLLM preempts rather than fails)
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-testid=\"stMetric\"]')].some(m => "
            "m.innerText.includes('infeasible') && !m.innerText.endsWith('\\n0'))")
        wait_settled(page)
        assert int(read_metric(page, "infeasible (memory)")) > 0
        assert page.locator('[data-testid="stPlotlyChart"]').count() >= 1
        page.screenshot(path=str(ARTIFACTS / "placement_page.png"), full_page=True)
