"""Issue 34 against the real served app (``serve.py`` on loopback, real Chromium):

* item 2, DNS rebinding: Chromium resolves an attacker's name to 127.0.0.1 (``--host-resolver-
  rules``, as a rebinding DNS server would); under that name the app serves nothing, its upload
  route and websocket refuse, while the operator's own extra name works; a state-changing
  request or websocket from another origin is refused;
* item 5, the upload route under a flood of slow bodies on one token: at most 20 in flight
  (the rest 429 at once), each cut off after the idle timeout (408), no part file left, and the
  server log stays small;
* item 8, the server's start removes the upload files and cache temporaries a killed server
  left.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest
from harness import browser_page, streamlit_server

pytestmark = pytest.mark.browser

REBIND = "rebind.test"  # the attacker's name, resolved to 127.0.0.1
OWN = "headroom.test"  # a name the operator added ($HEADROOM_ALLOWED_HOSTS)
RULES = f"--host-resolver-rules=MAP {REBIND} 127.0.0.1, MAP {OWN} 127.0.0.1"


def _dead_pid() -> int:
    out = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The served app over a fresh store, started after a killed server's leftovers were put
    beside the store; idle bodies cut off after 2 s; ``headroom.test`` allowed."""
    root = tmp_path_factory.mktemp("secure")
    db, raw = root / "s.duckdb", root / "raw"
    raw.mkdir()
    dead = _dead_pid()
    uploads, envelope = root / "uploads-tmp", root / "s-cache" / "envelope"
    uploads.mkdir()
    envelope.mkdir(parents=True)
    left = [uploads / f"upload-{dead}-0a1b.part", uploads / f"upload-{dead}-2c3d.csv.gz",
            envelope / f".tmp-envelope-{dead}-xyz"]
    left[0].write_bytes(b"half a file")
    left[1].write_bytes(b"a whole file nobody ingested")
    left[2].mkdir()
    (left[2] / "series.parquet").write_bytes(b"half an entry")
    log = root / "streamlit.log"
    env = {"HEADROOM_UPLOAD_IDLE_S": "2", "HEADROOM_ALLOWED_HOSTS": OWN}
    with streamlit_server(db, raw, log, env=env) as url:
        yield {"url": url, "port": urlsplit(url).port, "root": root, "left": left, "log": log,
               "uploads": uploads}


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module, resolving the attacker's and the operator's names
    to 127.0.0.1: ``(sync_api, page)``."""
    with browser_page(args=(RULES,)) as opened:
        yield opened


def _raw_request(port: int, head: str, body: bytes = b"", read_s: float = 10.0) -> str:
    """Send ``head`` (request line and headers) and ``body`` over one socket; return the status
    line of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_s) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        return sock.recv(4096).decode(errors="replace").split("\r\n", 1)[0]


def _ws_handshake(port: int, host: str, origin: str | None) -> str:
    origin_line = f"Origin: {origin}\n" if origin else ""
    return _raw_request(port, f"GET /_stcore/stream HTTP/1.1\nHost: {host}\nUpgrade: websocket\n"
                              "Connection: Upgrade\nSec-WebSocket-Version: 13\n"
                              f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\n{origin_line}")


def test_the_start_removed_what_a_killed_server_left(served):
    assert not any(path.exists() for path in served["left"])


def test_a_rebound_name_reaches_nothing_and_the_operators_name_works(served, browser):
    port = served["port"]
    _, page = browser
    answer = page.goto(f"http://{REBIND}:{port}/")
    assert answer.status == 400 and "Invalid host header" in page.content()
    # what a script of the attacker's page can still try, under its own (rebound) origin
    put = page.evaluate("""async () => (await fetch('/headroom/upload/x/a.csv',
                             {method: 'PUT', body: 'ts,prompt_tokens'})).status""")
    assert put == 400
    opened = page.evaluate(f"""() => new Promise((done) => {{
        const ws = new WebSocket('ws://{REBIND}:{port}/_stcore/stream');
        ws.onopen = () => done('open'); ws.onerror = () => done('refused');
        setTimeout(() => done('timeout'), 20000); }})""")
    assert opened == "refused"
    page.goto(f"http://{OWN}:{port}/")  # a name the operator added: the app itself
    page.get_by_text("No data yet").wait_for()
    assert _raw_request(port, f"GET / HTTP/1.1\nHost: {REBIND}:{port}\n").endswith("400 Bad Request")


def test_the_served_metrics_route_answers_prometheus_text_under_the_host_guard(served):
    from prometheus_client.parser import text_string_to_metric_families

    port = served["port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
        assert resp.headers["Content-Type"].startswith("text/plain")
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["headroom_live_runs"].samples[0].value == 0  # a fresh store: no live run
    assert _raw_request(port, f"GET /metrics HTTP/1.1\nHost: {REBIND}:{port}\n").endswith(
        "400 Bad Request")


def test_state_changing_requests_from_another_origin_are_refused(served):
    port = served["port"]
    host = f"127.0.0.1:{port}"
    assert "101" in _ws_handshake(port, host, f"http://{host}")  # the app's own page
    assert "101" in _ws_handshake(port, host, None)  # no Origin: not a browser acting for a site
    for origin in ("http://evil.example", "null", f"http://{REBIND}:{port}",
                   # another page of this machine (another port, another scheme): the break-it
                   # review opened the websocket from http://localhost:9999
                   "http://localhost:9999", f"http://127.0.0.1:{port + 1}", "https://localhost"):
        assert "403" in _ws_handshake(port, host, origin), origin
    assert "101" in _ws_handshake(port, f"localhost:{port}", f"http://localhost:{port}")
    assert "403" in _ws_handshake(port, f"localhost:{port}", f"http://127.0.0.1:{port}")
    assert _raw_request(port, f"GET /_stcore/health HTTP/1.1\nHost: [::1]:{port}\n").endswith(
        "200 OK")  # an IPv6 loopback Host
    put = urllib.request.Request(f"http://{host}/headroom/upload/x/a.csv", data=b"x",
                                 method="PUT", headers={"Origin": "http://evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(put, timeout=10)
    assert refused.value.code == 403
    with urllib.request.urlopen(f"http://{host}/_stcore/health", timeout=10) as ok:  # GET
        assert ok.status == 200


TINY = b"ts,prompt_tokens,completion_tokens\n2024-01-01 00:00:00,10,5\n"


def _session_token(url: str, browser) -> str:
    """The upload token the Data page gave a real browser session (read off its first PUT,
    once the page has ingested that file and so holds no pending upload)."""
    sync_api, page = browser
    page.goto(url)
    page.get_by_text("No data yet").wait_for()
    with page.expect_request(lambda r: r.method == "PUT") as request:
        page.get_by_test_id("hr-large-upload-input").set_input_files(
            files=[{"name": "tiny.csv", "mimeType": "text/csv", "buffer": TINY}])
    ledger = page.locator('[data-testid="stDataFrame"]').filter(has_text="tiny").first
    sync_api.expect(ledger).to_be_visible()
    return urlsplit(request.value.url).path.split("/")[3]


@pytest.fixture(scope="module")
def token(served, browser) -> str:
    return _session_token(served["url"], browser)


def test_slow_bodies_on_one_token_are_bounded_and_cut_off(served, token):
    """30 simultaneous PUTs on one session's token that send one byte and stall: 20 are let in
    (the session's cap, counted as each request starts) and cut off after the 2 s idle timeout
    with 408; the other 10 are refused at once with 429; no part file is left and the log holds
    no flood."""
    port = served["port"]
    socks = []
    for i in range(30):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(f"PUT /headroom/upload/{token}/slow{i}.csv HTTP/1.1\r\nHost: 127.0.0.1:"
                     f"{port}\r\nContent-Length: 1000000\r\n\r\nx".encode())
        socks.append(sock)
    start = time.monotonic()
    statuses = []
    for sock in socks:
        statuses.append(sock.recv(4096).decode(errors="replace").split("\r\n", 1)[0])
        sock.close()
    assert time.monotonic() - start < 25
    codes = sorted(s.split()[1] for s in statuses)
    assert codes.count("408") == 20 and codes.count("429") == 10, codes
    assert not list(served["uploads"].glob("*.part"))
    assert served["log"].stat().st_size < 200_000


def test_the_plain_uploader_takes_no_file_over_its_cap(served, browser):
    """Issue 34 item 6: Streamlit's own upload endpoint holds a file whole in server memory, so
    the served app refuses a body over 50 MB (or of undeclared length) before reading it; the
    widget says where larger files go."""
    port = served["port"]
    for declared in ("Content-Length: 60000000\n", "Transfer-Encoding: chunked\n",
                     # the break-it review's smuggle: a small length over a huge chunked body
                     "Content-Length: 10\nTransfer-Encoding: chunked\n"):
        status = _raw_request(port, f"PUT /_stcore/upload_file/s/f HTTP/1.1\nHost: 127.0.0.1:"
                                    f"{port}\n{declared}")
        assert "413" in status, (declared, status)
    _, page = browser
    page.goto(served["url"])
    page.get_by_text("Files up to 50 MB: the uploader below").wait_for()


def test_a_trickle_is_cut_off_by_its_average_rate(served, token):
    """Found by the break-it review: a byte every 20 s reset a 30 s idle timer for ever. A body
    sending a byte every 0.5 s (never idle for the 2 s timeout) is cut off with 408 once its
    average falls under 16 KB/s past the first 2 s."""
    port = served["port"]
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"PUT /headroom/upload/{token}/trickle.csv HTTP/1.1\r\nHost: 127.0.0.1:"
                     f"{port}\r\nContent-Length: 1000000\r\n\r\n".encode())
        sock.settimeout(0.5)
        answer = b""
        while not answer and time.monotonic() - start < 20:
            sock.sendall(b"x")
            try:
                answer = sock.recv(4096)
            except TimeoutError:
                continue
        sock.settimeout(5)
        while b"slower" not in answer:  # the body may come in a later segment than the head
            more = sock.recv(4096)
            if not more:
                break
            answer += more
    assert b" 408 " in answer.split(b"\r\n", 1)[0], answer[:200]
    assert b"slower than 16 KB/s" in answer
    assert time.monotonic() - start < 10
    assert not list(served["uploads"].glob("*.part"))

