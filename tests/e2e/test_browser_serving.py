"""Serving page in headless Chromium: move the safety margin, see energy and SLO values change."""

from __future__ import annotations

import pytest

from tests.e2e.test_browser import ARTIFACTS, _page, app_url  # noqa: F401  (fixture)

pytestmark = pytest.mark.browser

FILES = ("azure_llm/AzureLLMInferenceTrace_conv.csv",
         "ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
         "llm_inference_bench_argonne/Fig_21__all_results_TTFT.csv")


def _metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def _wait_change(page, values: list[str]) -> None:
    """Wait until one of the metric values shown is no longer among ``values``."""
    page.wait_for_function(
        "(vals) => { const v = [...document.querySelectorAll("
        "'[data-testid=\"stMetricValue\"]')].map(x => x.innerText);"
        " return v.length > 0 && vals.some(x => !v.includes(x)); }", arg=values,
        timeout=120_000)


@pytest.mark.parametrize("app_url", [FILES], indirect=True)
def test_safety_margin_changes_energy_and_slo(app_url):  # noqa: F811
    with _page(1400) as (sync_api, page):
        page.goto(app_url)
        page.get_by_role("link", name="Serving", exact=True).click()
        page.get_by_text("Festina energy").wait_for()
        first = _metric(page, "Festina energy")
        window = page.get_by_role("spinbutton", name="simulate the first")
        window.fill("3")
        window.press("Enter")
        tbt = page.get_by_role("spinbutton", name="TBT SLO (ms)")
        tbt.fill("20")
        tbt.press("Enter")
        _wait_change(page, [first])
        page.wait_for_timeout(4000)  # let the last rerun (TBT change) settle
        before = (_metric(page, "Festina energy"), _metric(page, "Festina TBT attainment"))
        slider = page.get_by_role("slider").first
        slider.focus()
        for _ in range(20):  # 0.05 -> 0.25 in steps of 0.01
            slider.press("ArrowRight")
        _wait_change(page, list(before))
        page.wait_for_timeout(2000)
        after = (_metric(page, "Festina energy"), _metric(page, "Festina TBT attainment"))
        page.screenshot(path=str(ARTIFACTS / "serving_page.png"), full_page=True)
    assert after[0] != before[0], (before, after)
    assert after[1] != before[1], (before, after)
