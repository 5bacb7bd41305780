"""Issue 16 item 3: the Data page's "Large files (streamed to disk)" uploader sends a real file
through the app's streamed-upload route (serve.py) and the file is ingested into the ledger;
nothing is left in the upload folder. The dataset's download is built on the click (not on
every page run, where a large dataset's whole export sat in server memory) and holds every row."""

from __future__ import annotations

import pytest
from harness import browser_page, shared, wait_settled

pytestmark = pytest.mark.browser


def test_large_file_uploader_streams_to_disk_and_ingests(app_url, tmp_path):
    conv = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
    with browser_page() as (sync_api, page):
        page.goto(app_url)
        page.get_by_text("No data yet").wait_for()
        page.get_by_test_id("hr-large-upload-input").set_input_files(str(conv))
        page.get_by_text("19,366 rows").wait_for()  # the ingest report
        table = page.locator('[data-testid="stDataFrame"]').filter(  # the ledger
            has_text="AzureLLMInferenceTrace_conv").first
        sync_api.expect(table).to_contain_text("AzureLLMInferenceTrace_conv")
        wait_settled(page)
        body = page.locator("body").text_content() or ""
        assert "Traceback" not in body and "refused" not in body
        with page.expect_download() as download:
            page.get_by_role("button", name="Download AzureLLMInferenceTrace_conv.csv").click()
        lines = download.value.path().read_text().splitlines()
        assert len(lines) == 1 + 19_366 and "ts" in lines[0]
    folder = tmp_path / "uploads-tmp"  # Settings.upload_dir beside the test's store
    assert not folder.exists() or list(folder.iterdir()) == []
