"""Issue 34 item 7: ``headroom pull`` against hostile or broken servers (real local HTTP and
HTTPS servers; the HTTPS one's certificate is signed by a CA made here and trusted through
``SSL_CERT_FILE``, as the operator's system store would be).

* an endless body is cut off at the file's expected size (the registry's, or
  ``$HEADROOM_PULL_MAX_MB`` when none is known) and nothing is kept;
* a redirect from https to http is refused and no hash is recorded;
* a part file of unknown origin is not resumed for a file whose hash is unknown, and a resumed
  file that fails its hash is fetched once more from its first byte.
"""

from __future__ import annotations

import http.server
import json
import os
import ssl
import subprocess
import sys
import threading

import pytest
from harness import REPO, make_certs, shared, strict_loads

from analytics.ingest import sources

CODE = shared("azure_llm/AzureLLMInferenceTrace_code.csv").read_bytes()
CONV = shared("azure_llm/AzureLLMInferenceTrace_conv.csv").read_bytes()


class Hostile(http.server.BaseHTTPRequestHandler):
    """``/endless``: bytes forever, no Content-Length; ``/code`` and ``/conv``: the staged
    traces (with single-range support); ``/redirect``: 302 to ``Hostile.redirect_to``."""

    protocol_version = "HTTP/1.0"
    redirect_to = ""
    ranges: list[str] = []
    sent: list[int] = []

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 - http.server naming
        if self.path == "/endless":
            self.send_response(200)
            self.end_headers()
            block, sent = b"x" * 65536, 0
            try:
                while sent < 50_000_000:
                    self.wfile.write(block)
                    sent += len(block)
            except OSError:
                pass
            type(self).sent.append(sent)
            return
        if self.path in ("/short", "/hugecl"):  # a length the body does not keep to
            short = self.path == "/short"
            self.send_response(200)
            self.send_header("Content-Length", "2000" if short else str(10**10))
            self.end_headers()
            try:
                self.wfile.write(b"x" * (1000 if short else 3_000_000))
            except OSError:
                pass
            return
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", self.redirect_to)
            self.end_headers()
            return
        data = {"/code": CODE, "/conv": CONV}.get(self.path)
        if data is None:
            self.send_error(404)
            return
        start = 0
        if rng := self.headers.get("Range"):
            type(self).ranges.append(rng)
            start = int(rng.split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])


def _serve(context: ssl.SSLContext | None = None):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    scheme = "http"
    if context is not None:
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
        scheme = "https"
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"{scheme}://127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture
def plain():
    Hostile.ranges, Hostile.sent = [], []
    httpd, url = _serve()
    yield url
    httpd.shutdown()


def test_an_endless_body_stops_at_the_pinned_size(plain, tmp_path):
    with pytest.raises(sources.PullError, match="more than the 320,117 bytes"):
        sources.pull("azure2023_code", tmp_path, f"{plain}/endless", progress=False,
                     allow_insecure=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("route", ["endless", "hugecl"])
def test_a_body_of_unknown_size_stops_at_the_cap(plain, tmp_path, monkeypatch, route):
    """No pinned size: ``HEADROOM_PULL_MAX_MB`` caps an endless body (``endless``) and a
    declared ``Content-Length`` above it (``hugecl``) alike."""
    monkeypatch.setenv("HEADROOM_PULL_MAX_MB", "2")
    with pytest.raises(sources.PullError, match="more than the 2,000,000 bytes"):
        sources.pull("azure2024_conv", tmp_path, f"{plain}/{route}", progress=False,
                     allow_insecure=True)
    assert list(tmp_path.iterdir()) == []


def test_a_part_file_of_unknown_origin_is_not_resumed_nor_recorded(plain, tmp_path):
    """azure2024_conv has no known hash: a junk part file is dropped, the whole file fetched
    (no Range request) and the hash of the served bytes recorded."""
    (tmp_path / "AzureLLMInferenceTrace_conv_1week.csv.part").write_bytes(b"junk" * 1000)
    got = sources.pull("azure2024_conv", tmp_path, f"{plain}/conv", progress=False,
                       allow_insecure=True)
    assert Hostile.ranges == []
    assert got["sha256"] == sources.REGISTRY["azure2023_conv"].sha256 and got["bytes"] == len(CONV)
    recorded = json.loads((tmp_path / sources.RECORDED).read_text())
    assert recorded == {"AzureLLMInferenceTrace_conv_1week.csv": got["sha256"]}


def test_a_resumed_file_that_fails_its_hash_is_fetched_again_from_its_first_byte(plain,
                                                                                tmp_path):
    (tmp_path / "AzureLLMInferenceTrace_code.csv.part").write_bytes(b"j" * 100_000)
    got = sources.pull("azure2023_code", tmp_path, f"{plain}/code", progress=False,
                       allow_insecure=True)
    assert Hostile.ranges == ["bytes=100000-"]  # resumed once, then fetched whole
    assert got["verified"] and (tmp_path / "AzureLLMInferenceTrace_code.csv").read_bytes() == CODE


def test_a_redirect_from_https_to_http_is_refused_and_nothing_recorded(plain, tmp_path):
    certs = make_certs(tmp_path, "pull")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs["cert"], certs["key"])
    httpd, secure = _serve(context)
    try:
        Hostile.redirect_to = f"{plain}/conv"
        dest = tmp_path / "raw"
        env = {**os.environ, "SSL_CERT_FILE": certs["ca"]}
        run = [sys.executable, "-m", "analytics.cli", "--db", str(tmp_path / "s.duckdb"), "pull",
               "azure2024_conv", "--dest", str(dest), "--url"]
        ok = subprocess.run([*run, f"{secure}/conv"], capture_output=True, text=True, cwd=REPO,
                            env=env, timeout=120)
        assert ok.returncode == 0, ok.stderr  # the https server itself is trusted
        (dest / "AzureLLMInferenceTrace_conv_1week.csv").unlink()
        (dest / sources.RECORDED).unlink()
        out = subprocess.run([*run, f"{secure}/redirect"], capture_output=True, text=True,
                             cwd=REPO, env=env, timeout=120)
        assert out.returncode == 1
        assert "away from https: refused" in strict_loads(out.stdout)["error"]
        assert sorted(p.name for p in dest.iterdir()) == []
    finally:
        httpd.shutdown()


def test_a_body_shorter_than_announced_is_kept_to_resume_not_recorded(plain, tmp_path):
    """Found by the break-it review: a server that announces 2,000 bytes and sends 1,000 was
    taken at its word and its hash recorded as the first download's."""
    with pytest.raises(sources.PullError, match="ended after 1,000 of the 2,000 bytes"):
        sources.pull("azure2024_conv", tmp_path, f"{plain}/short", progress=False,
                     allow_insecure=True)
    assert not (tmp_path / sources.RECORDED).exists()
    assert (tmp_path / "AzureLLMInferenceTrace_conv_1week.csv.part").stat().st_size == 1000

