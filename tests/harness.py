"""Shared test harness: staged-data paths, store seeding, the AppTest factory, and the browser
helpers (Chromium launch, a Streamlit server on a free port, metric reading, waits on the app).

``conftest.py`` re-exports ``REPO``, ``SHARED_DATA`` and ``shared`` and builds its fixtures
(``app_url``) on these helpers; test modules import the rest from here. Every browser wait is on
an element or value, never a fixed time: Streamlit reruns asynchronously, so a test first waits
for the value the change must produce (or for a metric to differ from its value before the
change) and then for the run to finish (:func:`wait_settled`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("HEADROOM_SHARED_DATA", REPO.parent / "shared" / "data"))
APP = str(REPO / "app.py")
SERVE = str(REPO / "serve.py")  # the ASGI entry `make run` starts: app.py plus the upload route
ARTIFACTS = REPO / "tests" / "artifacts"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync"]
# generous limits: the app fits models and simulates, on a shared 2-core machine minutes per run;
# the variables raise them further where the machine is even busier (the tests stay the same)
APPTEST_TIMEOUT_S = float(os.environ.get("HEADROOM_APPTEST_TIMEOUT", 300))  # one AppTest run
WAIT_MS = float(os.environ.get("HEADROOM_BROWSER_WAIT_MS", 120_000))  # one browser wait


def missing(path: Path) -> None:
    """A staged file or case the test needs is absent: a failure in CI (``CI`` set, where the
    data sits beside the repo), a skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"staged data missing in CI: {path}")
    pytest.skip(f"staged data not found: {path}")


def case_file(name: str) -> Path:
    """Path of a file of ``../shared/cases`` (the real-world inputs and their expected values);
    a failure in CI when absent, a skip elsewhere (:func:`missing`)."""
    path = SHARED_DATA.parent / "cases" / name
    if not path.exists():
        missing(path)
    return path


def shared(rel: str) -> Path:
    """Path of a staged real file; skips the test when the staged data is absent (CI has it)."""
    path = SHARED_DATA / rel
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"staged data missing in CI: {path}")
        pytest.skip(f"staged data not found: {path}")
    return path


def seed(db: Path, *rels: str) -> None:
    """Ingest the staged files ``rels`` (paths under the shared data folder) into the store
    ``db``, in one ``ingest_files`` call, and close the connection (the app opens its own)."""
    # imported on use: conftest imports this module, and most tests never seed a store
    from analytics import store
    from analytics.ingest import files as ingest

    paths = [shared(rel) for rel in rels]
    con = store.connect(db)
    try:
        ingest.ingest_files(con, [ingest.FileIn(path, path.name) for path in paths])
    finally:
        con.close()


def store_at_version(db: Path, version: int):
    """A raw DuckDB connection to a new store file at schema ``version`` (migrations 1 to
    ``version`` applied, as an older headroom left it), for migration tests."""
    import duckdb

    from analytics import store

    raw = duckdb.connect(str(db))
    raw.execute("CREATE TABLE schema_version (version INTEGER, applied_at TIMESTAMP)")
    for v in range(1, version + 1):
        for sql in store.MIGRATIONS[v]:
            raw.execute(sql)
        raw.execute("INSERT INTO schema_version VALUES (?, now())", [v])
    return raw


def new_app():
    """A fresh ``AppTest`` of ``app.py`` with a generous per-run timeout (``APPTEST_TIMEOUT_S``,
    300 s unless ``HEADROOM_APPTEST_TIMEOUT`` says otherwise: pages that fit models take seconds
    alone, minutes on a loaded 2-core machine)."""
    # imported on use: Streamlit is heavy and only the page tests need it
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(APP, default_timeout=APPTEST_TIMEOUT_S)


def metrics(at) -> dict[str, str]:
    """The metrics an ``AppTest`` run shows, label -> displayed value."""
    return {m.label: m.value for m in at.metric}


# --- browser -------------------------------------------------------------------------------

def strict_loads(text: str):
    """Parse a CLI document with a strict JSON parser: ``NaN``, ``Infinity`` and ``-Infinity``
    raise (Python's json accepts them by default; jq and browsers do not). Every test reads CLI
    output through this, so every command the suite runs is checked for strict JSON."""
    def refuse(token):
        raise ValueError(f"non-strict JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def uploader_key(at) -> str:
    """Key of the Data page's uploader now: ``uploads``, then ``uploads_<n>`` after the n-th
    ingest (a new key clears the uploader)."""
    n = at.session_state["upload_round"] if "upload_round" in at.session_state else 0
    return f"uploads_{n}" if n else "uploads"


def table_with(at, column: str):
    """The first dataframe on the AppTest page that has ``column`` (pages show several)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def need_browser():
    """The ``playwright.sync_api`` module; a failure in CI (``CI`` set) when Chromium or
    Playwright is missing, a skip elsewhere."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"browser tests are required in CI but {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} not installed")
    return pytest.importorskip("playwright.sync_api")


#: Chromium processes shared by the tests of one pytest process, by extra flags: a launch costs
#: about 2 s of CPU, and each test gets its own browser context (its own cookies, storage and
#: cache: a fresh profile) anyway.
_BROWSERS: dict[tuple[str, ...], object] = {}
_PLAYWRIGHT: list = []


def _shared_browser(sync_api, args: tuple[str, ...]):
    if not _PLAYWRIGHT:
        import atexit

        _PLAYWRIGHT.append(sync_api.sync_playwright().start())
        atexit.register(close_browsers)
    if args not in _BROWSERS:
        _BROWSERS[args] = _PLAYWRIGHT[0].chromium.launch(
            executable_path=CHROMIUM, headless=True, args=[*LAUNCH_ARGS, *args])
    return _BROWSERS[args]


def close_browsers() -> None:
    """Close the shared browsers and stop Playwright (the e2e package does when its last test
    has run; a bench process at exit)."""
    for browser in _BROWSERS.values():
        with contextlib.suppress(Exception):
            browser.close()
    _BROWSERS.clear()
    if _PLAYWRIGHT:
        with contextlib.suppress(Exception):
            _PLAYWRIGHT.pop().stop()


@contextlib.contextmanager
def browser_page(height: int = 1000, args: tuple[str, ...] = (), fresh: bool = False):
    """Yield ``(sync_api, page)``: a page 1400 px wide in a new context (a fresh profile) of a
    headless Chromium shared by this process's tests (``args``: more Chromium flags, a browser
    of their own; ``fresh``: a browser launched for this page alone and closed on exit, as the
    benches that time a cold browser need); page actions, waits and ``sync_api.expect``
    assertions time out after ``WAIT_MS``; the context is closed on exit. Creates
    ``ARTIFACTS`` for screenshots."""
    sync_api = need_browser()
    sync_api.expect.set_options(timeout=WAIT_MS)  # expect()'s own default is 5 s
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    if fresh:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=[*LAUNCH_ARGS, *args])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": height})
                page.set_default_timeout(WAIT_MS)
                yield sync_api, page
            finally:
                browser.close()
        return
    context = _shared_browser(sync_api, tuple(args)).new_context(
        viewport={"width": 1400, "height": height})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        yield sync_api, page
    finally:
        context.close()


@contextlib.contextmanager
def fake_scheduler(folder: Path, silent: bool = False):
    """Run ``tests/fake_scheduler.py`` (a hostile Dask scheduler: its handshake reply, once
    unpickled, creates ``marker``; or, ``silent``, a peer that never answers) and yield
    ``(address, marker, log)``: ``log`` gets a line per connection it accepted."""
    marker, log = folder / "pwned", folder / "fake-scheduler.log"
    log.touch()
    args = [sys.executable, str(REPO / "tests" / "fake_scheduler.py"), str(marker), str(log)]
    proc = subprocess.Popen(args + (["--silent"] if silent else []), stdout=subprocess.PIPE,
                            text=True, cwd=REPO)
    try:
        address = proc.stdout.readline().strip()
        if not address:
            raise RuntimeError("the fake scheduler did not start")
        yield address, marker, log
    finally:
        proc.kill()
        proc.wait()


def constant_parquet(path: Path, rows: int, group: int = 10_000_000) -> None:
    """A canonical requests Parquet file of ``rows`` identical rows (zstd), written a row group
    at a time so that its writer never holds it whole: small on disk, huge decoded (the
    Parquet "bomb" of the ingest tests and ``bench/bench_bombs.py``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("ts", pa.timestamp("us")), ("prompt_tokens", pa.int64()),
                        ("completion_tokens", pa.int64())])
    with pq.ParquetWriter(path, schema, compression="zstd") as out:
        done = 0
        while done < rows:
            n = min(group, rows - done)
            out.write_table(pa.table({
                "ts": pa.array(np.full(n, 1_700_000_000_000_000), pa.timestamp("us")),
                "prompt_tokens": np.full(n, 7, np.int64),
                "completion_tokens": np.full(n, 3, np.int64)}, schema=schema))
            done += n


def make_certs(folder: Path, name: str) -> dict:
    """A CA and one certificate it signed for 127.0.0.1 (PEM files under ``folder/name``, made
    with the ``openssl`` command): ``{"ca", "cert", "key"}`` paths."""
    d = folder / name
    d.mkdir()

    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "1", "-subj", f"/CN={name}-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr",
        "-subj", "/CN=127.0.0.1")
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "node.pem", "-days", "1", "-extfile", "ext")
    return {"ca": str(d / "ca.pem"), "cert": str(d / "node.pem"), "key": str(d / "node.key")}


PROMETHEUS, PROMTOOL = "/usr/bin/prometheus", "/usr/bin/promtool"


def need_prometheus() -> None:
    """Fail in CI (``CI`` set: ``.ci/run`` installs Debian's ``prometheus``) when the
    Prometheus server or promtool is missing, skip elsewhere."""
    for tool in (PROMETHEUS, PROMTOOL):
        if not Path(tool).exists():
            if os.environ.get("CI"):
                pytest.fail(f"the live tests need a real Prometheus in CI, but {tool} is missing")
            pytest.skip(f"{tool} not installed (apt-get install prometheus)")


@contextlib.contextmanager
def prometheus_server(folder: Path, openmetrics: str | None, start_s: float = 30,
                      port: int | None = None, scrape: str | None = None,
                      rules: Path | None = None):
    """A real Prometheus server on a free loopback port (or ``port``) over a TSDB back-filled
    from the OpenMetrics text ``openmetrics`` (``promtool tsdb create-blocks-from openmetrics``;
    the retention is 100 years, so old traces are kept), yielding its URL once ``/-/ready``
    answers; stopped afterwards. ``folder`` holds the input, the TSDB and the log; with
    ``openmetrics`` None the TSDB already there is served again (a restarted server).
    ``scrape`` (``host:port``) adds a job ``headroom`` scraping that target's ``/metrics``
    every second, ``rules`` a rules file evaluated every second."""
    import urllib.request

    need_prometheus()
    folder.mkdir(parents=True, exist_ok=True)
    if openmetrics is not None:
        (folder / "input.om").write_text(openmetrics)
        subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics",
                        str(folder / "input.om"), str(folder / "tsdb")], check=True,
                       capture_output=True, timeout=120)
    config = {"global": {"scrape_interval": "1s" if scrape else "15s",
                         "evaluation_interval": "1s"},
              "scrape_configs": [{"job_name": "headroom", "static_configs": [
                  {"targets": [scrape]}]}] if scrape else [],
              **({"rule_files": [str(rules)]} if rules else {})}
    (folder / "prometheus.yml").write_text(json.dumps(config))  # YAML is a superset of JSON
    port = port or free_port()
    with open(folder / "prometheus.log", "a") as log:
        proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={folder / 'prometheus.yml'}",
             f"--storage.tsdb.path={folder / 'tsdb'}", "--storage.tsdb.retention.time=100y",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + start_s
            while True:
                try:
                    with urllib.request.urlopen(url + "/-/ready", timeout=2) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("Prometheus did not start: "
                                       + (folder / "prometheus.log").read_text()[-2000:])
                time.sleep(0.2)
            yield url
        finally:
            stop_process(proc)


def stop_process(proc: subprocess.Popen) -> None:
    """Terminate a server the tests started; kill it when it is still there after 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def counter_openmetrics(series: dict[tuple[str, str], tuple], help_text: str = "tokens") -> str:
    """OpenMetrics text of counters: ``series`` maps ``(metric family, model_name)`` to
    ``(sample times in UNIX s, cumulative values)``; each family is a ``counter`` whose samples
    are ``<family>_total``."""
    lines, seen = [], set()
    for (family, model), (ts_s, values) in series.items():
        if family not in seen:
            lines += [f"# HELP {family} {help_text}", f"# TYPE {family} counter"]
            seen.add(family)
        lines += [f'{family}_total{{model_name="{model}"}} {v:.17g} {t:.3f}'
                  for t, v in zip(ts_s, values, strict=True)]
    return "\n".join([*lines, "# EOF"]) + "\n"


@contextlib.contextmanager
def http_server(answer):
    """A real HTTP server on a free loopback port, answering each GET with ``answer(path)`` =
    ``(status, body bytes, content type)``; yields its base URL; shut down afterwards. The
    live tests' stand-in for a broken Prometheus, an engine's exporter and headroom's
    ``/metrics`` seen by a real Prometheus."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            status, body, kind = answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(db: Path, raw: Path, log_path: Path, start_s: float = 60,
                     env: dict | None = None):
    """Run ``streamlit run serve.py`` (``app.py`` as ``make run`` serves it) on a free port over
    the store ``db`` and data folder ``raw`` (``env``: more environment variables);
    yield its URL once ``/_stcore/health`` answers. The server log goes to ``log_path``.

    Raises
    ------
    RuntimeError
        When the server exits (the message is its log) or does not answer within ``start_s``.
    """
    port = free_port()
    env = {**os.environ, "HEADROOM_DB": str(db), "HEADROOM_DATA_DIR": str(raw), **(env or {})}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", SERVE,
             "--server.port", str(port), "--server.address", "127.0.0.1",
             "--server.headless", "true", "--browser.gatherUsageStats", "false"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_healthy(url, proc, log_path, start_s)
            yield url
        finally:
            stop_process(proc)


def _wait_healthy(url: str, proc: subprocess.Popen, log_path: Path, start_s: float) -> None:
    """Poll the server's health endpoint every 0.5 s until it answers (the page under test is
    not open yet, so this polls a process, not the app's state)."""
    deadline = time.time() + start_s
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            return
        except OSError as exc:
            if proc.poll() is not None:
                raise RuntimeError(log_path.read_text()) from exc
            time.sleep(0.5)
    raise RuntimeError(f"streamlit did not start within {start_s:.0f} s")


def metric_box(page, label: str):
    """The first ``st.metric`` whose text contains ``label`` (a Playwright locator)."""
    return page.locator('[data-testid="stMetric"]', has_text=label).first


def read_metric(page, label: str) -> str:
    """The displayed value of the first ``st.metric`` whose text contains ``label``."""
    return metric_box(page, label).locator('[data-testid="stMetricValue"]').inner_text()


_SETTLED_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return app !== null
    && app.getAttribute('data-test-connection-state') === 'CONNECTED'
    && app.getAttribute('data-test-script-state') === 'notRunning'
    && document.querySelector('[data-testid="stStatusWidgetRunningIcon"]') === null
    && document.querySelector('[data-stale="true"]') === null;
}"""

_CHANGED_JS = """(before) => Object.entries(before).some(([label, old]) => {
  const box = [...document.querySelectorAll('[data-testid="stMetric"]')]
    .find(m => m.textContent.includes(label));
  if (!box) return false;
  const value = box.querySelector('[data-testid="stMetricValue"]');
  return value !== null && value.innerText !== old;
})"""


def wait_settled(page, timeout: float = WAIT_MS) -> None:
    """Wait until the app is connected, its script is not running, the running icon of the
    status widget (``stStatusWidget``) is gone and no element is stale (left from the last run).

    Call it after waiting for a value the change must produce: right after a widget change the
    rerun may not have started yet, and the page would look settled on the old run.
    """
    page.wait_for_function(_SETTLED_JS, timeout=timeout)


def wait_metrics_change(page, before: dict[str, str], timeout: float = WAIT_MS) -> None:
    """Wait until at least one metric in ``before`` (label -> value read before the change)
    shows another value, then until the run has settled (:func:`wait_settled`)."""
    page.wait_for_function(_CHANGED_JS, arg=before, timeout=timeout)
    wait_settled(page, timeout)


def replica_stub(model, prefill_left=0.0, queued=0.0, running=(), iterations=0.0):
    """A serving :class:`~analytics.serving.state.Replica` in a hand-set state (for hand-derived
    scheduler checks): a prefill running when ``prefill_left`` > 0, ``running`` (end iteration,
    request id) pairs."""
    from analytics.serving.state import Replica

    r = Replica(0, model, 0.0)
    r.prefill_rid = 7 if prefill_left > 0 else -1
    r.prefill_left, r.queued_tokens, r.iterations = prefill_left, queued, iterations
    r.running = list(running)
    return r
