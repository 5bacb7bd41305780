"""The browser tests share one Chromium per set of flags (``harness.browser_page``: a launch
costs about 2 s of CPU; each test still gets a fresh browser context). It is stopped when the
last test of this package has run: Playwright's sync API keeps an event loop on the main
thread, which would refuse the ``asyncio.run`` of every later test in the process."""

from __future__ import annotations

import pytest
from harness import close_browsers


@pytest.fixture(scope="package", autouse=True)
def _shared_chromium():
    yield
    close_browsers()
