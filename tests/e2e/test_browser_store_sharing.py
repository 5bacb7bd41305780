"""Issue 16 item 9: the app server and the CLI on one store at once. A browser keeps the app
busy reading (Data and Demand pages) while the CLI reads and ingests into the same file: no lock
error on either side, no traceback in the page or the server log, and each sees the other's data.
"""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from harness import REPO, browser_page, shared, strict_loads, wait_settled

pytestmark = pytest.mark.browser

CONV = ("azure_llm/AzureLLMInferenceTrace_conv.csv",)


def _cli(db, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analytics.cli", "--db", str(db), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


@pytest.mark.parametrize("app_url", [CONV], indirect=True)
def test_app_and_cli_share_one_store(app_url, tmp_path):
    db = tmp_path / "e2e.duckdb"  # the store the app_url fixture serves
    code = shared("azure_llm/AzureLLMInferenceTrace_code.csv")
    results: dict[str, subprocess.CompletedProcess] = {}

    def cli_while_the_page_works():
        results["datasets"] = _cli(db, "datasets")
        results["ingest"] = _cli(db, "ingest", str(code))
        results["grid"] = _cli(db, "grid", "AzureLLMInferenceTrace_conv", "--bin", "5min")

    with browser_page() as (sync_api, page):
        page.goto(app_url)
        page.get_by_role("link", name="Demand", exact=True).click()
        worker = threading.Thread(target=cli_while_the_page_works)
        worker.start()  # the CLI runs while the Demand page reads and charts the store
        page.get_by_text("AzureLLMInferenceTrace_conv - demand per 10s").wait_for()
        worker.join(timeout=300)
        for name, proc in results.items():
            assert proc.returncode == 0, (name, proc.stderr)
        assert "AzureLLMInferenceTrace_conv" in {d["name"] for d in
                                                 strict_loads(results["datasets"].stdout)}
        assert strict_loads(results["ingest"].stdout)[0]["rows"] == 8819
        assert strict_loads(results["grid"].stdout)["bins"] == 12

        page.get_by_role("link", name="Data", exact=True).click()  # the app sees the CLI's ingest
        table = page.locator('[data-testid="stDataFrame"]').filter(
            has_text="AzureLLMInferenceTrace_code").first  # the ledger lists the CLI's ingest
        sync_api.expect(table).to_be_visible(timeout=60_000)
        wait_settled(page)
        body = page.locator("body").text_content() or ""
        assert "Traceback" not in body and "busy" not in body
    log = (tmp_path / "streamlit.log").read_text()
    assert "Traceback" not in log and "lock" not in log.lower()
