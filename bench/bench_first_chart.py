"""Cold first chart (issue 15: "cold first chart < 3 s on every page"): the seconds from opening
a page's address in headless Chromium to its first drawn Plotly chart (the Data page: its
first table), on a fresh Streamlit server over a fresh store seeded with real staged files
(those of ``bench_pages.SEEDS``) and an empty model cache, so nothing the page computes is
cached yet.

Each page gets its own server. The server's start-up (Python importing the app's libraries on
its first session, which a user pays once per server, not per page) is measured apart: the
browser first opens the Data page and waits until it has settled; then it opens the page under
test, whose results are not cached. Printed per page: the start-up seconds, the page's first
chart, the seconds until the page has finished running (the long work that runs after the
first chart, with a progress bar, cached for the next visit) and the server process's CPU
seconds over the page visit.

Wall seconds are the user's measure here; the host is shared, so the machine load
(``os.getloadavg``) is printed beside them.

    python bench/bench_first_chart.py [--pages demand capacity ...]

Needs ``/usr/bin/chromium`` (or ``CHROMIUM``) and Playwright, as the browser tests do.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
GOAL_S = 3.0
CHART = '[data-testid="stPlotlyChart"] .main-svg'
FIRST = {"data": '[data-testid="stDataFrame"]'}  # pages whose first figure is a table


def server_cpu_s(port: int) -> float:
    """CPU seconds (user + system) of the process listening on ``port`` (the server), read from
    /proc; 0.0 when it cannot be found."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        if str(port) in " ".join(proc.info["cmdline"] or []):
            t = proc.cpu_times()
            return t.user + t.system + t.children_user + t.children_system
    return 0.0


def visit(page_name: str, tmp: Path, timeout_s: float = 600) -> dict:
    from bench_pages import SEEDS
    from harness import browser_page, seed, streamlit_server, wait_settled

    db, raw = tmp / f"{page_name}.duckdb", tmp / f"raw_{page_name}"
    raw.mkdir()
    for rel in SEEDS[page_name]:
        seed(db, rel)
    with streamlit_server(db, raw, tmp / f"{page_name}.log") as url, \
            browser_page(fresh=True) as (_, page):
        port = int(url.rsplit(":", 1)[1])
        t0 = time.perf_counter()
        page.goto(url)  # the Data page: the server imports the app's libraries
        page.locator(FIRST["data"]).first.wait_for(timeout=timeout_s * 1000)
        wait_settled(page, timeout_s * 1000)
        start = time.perf_counter() - t0
        cpu0 = server_cpu_s(port)
        t0 = time.perf_counter()
        page.goto(f"{url}/{page_name}")
        first = None
        try:
            page.locator(FIRST.get(page_name, CHART)).first.wait_for(timeout=timeout_s * 1000)
            first = time.perf_counter() - t0
        except Exception:  # noqa: BLE001 - a page that draws no chart (timeout)
            pass
        wait_settled(page, timeout_s * 1000)
        done = time.perf_counter() - t0
        return {"page": page_name, "start_s": start, "first_chart_s": first, "done_s": done,
                "server_cpu_s": server_cpu_s(port) - cpu0}


def main() -> None:
    from bench_pages import SEEDS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", nargs="+", default=list(SEEDS))
    args = ap.parse_args()
    print(f"goal: first chart < {GOAL_S} s on every page, cold (fresh server, store and cache)")
    print(f"load average before: {os.getloadavg()}")
    print(f"{'page':<10} {'start-up s':>10} {'first chart s':>14} {'page done s':>12} "
          f"{'server CPU s':>13}  verdict")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name in args.pages:
            r = visit(name, Path(d))
            rows.append(r)
            first = r["first_chart_s"]
            verdict = "no chart" if first is None else "met" if first < GOAL_S else "NOT met"
            shown = "-" if first is None else f"{first:.2f}"
            print(f"{name:<10} {r['start_s']:>10.2f} {shown:>14} {r['done_s']:>12.2f} "
                  f"{r['server_cpu_s']:>13.2f}  {verdict}", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
