"""headroom pull against a local HTTP server serving the staged real files."""

from __future__ import annotations

import functools
import http.server
import socket
import subprocess
import sys
import threading

import pytest
from conftest import REPO, SHARED_DATA, shared
from harness import strict_loads

from analytics.ingest import sources


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with single-range ``Range: bytes=N-`` support, recording what was asked."""

    seen_ranges: list[str] = []
    honour_range = True

    def log_message(self, *args):  # keep test output quiet
        pass

    def do_GET(self):  # noqa: N802 - http.server naming
        rng = self.headers.get("Range")
        if not rng or not self.honour_range:
            return super().do_GET()
        type(self).seen_ranges.append(rng)
        path = self.translate_path(self.path)
        data = open(path, "rb").read()
        start = int(rng.split("=")[1].split("-")[0])
        if start >= len(data):
            self.send_response(416)
            self.end_headers()
            return None
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])
        return None


@pytest.fixture
def server():
    shared("azure_llm/AzureLLMInferenceTrace_code.csv")
    RangeHandler.seen_ranges = []
    RangeHandler.honour_range = True
    handler = functools.partial(RangeHandler, directory=str(SHARED_DATA))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_pull_verifies_checksum(server, tmp_path):
    res = sources.pull("azure2023_code", tmp_path, f"{server}/azure_llm/AzureLLMInferenceTrace_code.csv",
                       progress=False, allow_insecure=True)
    assert res["verified"] and res["bytes"] == 320117
    assert res["sha256"] == sources.REGISTRY["azure2023_code"].sha256
    assert (tmp_path / "AzureLLMInferenceTrace_code.csv").read_bytes() == \
        shared("azure_llm/AzureLLMInferenceTrace_code.csv").read_bytes()


def test_pull_resumes_from_partial_file(server, tmp_path):
    data = shared("azure_llm/AzureLLMInferenceTrace_code.csv").read_bytes()
    (tmp_path / "AzureLLMInferenceTrace_code.csv.part").write_bytes(data[:100_000])
    seen = []
    res = sources.pull("azure2023_code", tmp_path,
                       f"{server}/azure_llm/AzureLLMInferenceTrace_code.csv", progress=False,
                       allow_insecure=True,
                       on_progress=lambda done, total: seen.append((done, total)))
    assert RangeHandler.seen_ranges == ["bytes=100000-"]
    assert res["verified"]
    assert seen[-1] == (len(data), len(data))
    assert not (tmp_path / "AzureLLMInferenceTrace_code.csv.part").exists()


def test_pull_restarts_when_server_ignores_range(server, tmp_path):
    RangeHandler.honour_range = False
    data = shared("azure_llm/AzureLLMInferenceTrace_code.csv").read_bytes()
    (tmp_path / "AzureLLMInferenceTrace_code.csv.part").write_bytes(data[:5000])
    res = sources.pull("azure2023_code", tmp_path,
                       f"{server}/azure_llm/AzureLLMInferenceTrace_code.csv", progress=False,
                       allow_insecure=True)
    assert res["verified"] and res["bytes"] == len(data)


def test_pull_rejects_wrong_bytes_and_deletes_them(server, tmp_path):
    """The conv trace served for the pinned 320,117-byte code trace: refused once it passes
    that size (issue 34 item 7), nothing kept."""
    with pytest.raises(sources.PullError, match="more than the 320,117 bytes"):
        sources.pull("azure2023_code", tmp_path,
                     f"{server}/azure_llm/AzureLLMInferenceTrace_conv.csv", progress=False,
                     allow_insecure=True)
    assert list(tmp_path.iterdir()) == []


def test_pull_network_failure_keeps_partial(tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with pytest.raises(sources.PullError, match="resume"):
        sources.pull("azure2023_code", tmp_path, f"http://127.0.0.1:{port}/x.csv",
                     progress=False, allow_insecure=True, timeout_s=5)


def test_pull_http_error(server, tmp_path):
    with pytest.raises(sources.PullError, match="HTTP 404"):
        sources.pull("azure2023_code", tmp_path, f"{server}/nope.csv", progress=False, allow_insecure=True)


def test_cli_pull_then_ingest(server, tmp_path):
    db = tmp_path / "s.duckdb"
    dest = tmp_path / "raw"
    run = functools.partial(subprocess.run, capture_output=True, text=True, cwd=REPO)
    out = run([sys.executable, "-m", "analytics.cli", "--db", str(db), "pull", "azure2023_conv",
               "--dest", str(dest), "--url",
               f"{server}/azure_llm/AzureLLMInferenceTrace_conv.csv", "--insecure-url"])
    assert out.returncode == 0, out.stderr
    doc = strict_loads(out.stdout)
    assert doc["bytes"] == 719188 and doc["verified"] is True
    out = run([sys.executable, "-m", "analytics.cli", "--db", str(db), "ingest", doc["path"]])
    assert out.returncode == 0, out.stderr
    assert strict_loads(out.stdout)[0]["rows"] == 19366


def test_registry_entries_are_complete():
    assert {"burstgpt1", "azure2023_conv", "azure2024_conv", "mooncake_conversation",
            "sustaindc_carbon_ciso", "greendcc_carbon_gb_2023",
            "mlenergy_v3_lm_arena_chat"} <= set(sources.REGISTRY)
    for s in sources.REGISTRY.values():
        assert s.url.startswith("https://") and s.licence and s.citation
        assert s.sha256 is None or len(s.sha256) == 64
    # every entry whose publisher gives a hash (staged copies, Git LFS pointers) pins it; the
    # rest are a release asset and blob-hosted traces, hashed on first download
    assert {n for n, s in sources.REGISTRY.items() if s.sha256 is None} == {
        "burstgpt3", "azure2024_code", "azure2024_conv"}


def test_pull_accepts_only_https_unless_told(server, tmp_path, capsys):
    from analytics import cli

    url = f"{server}/azure_llm/AzureLLMInferenceTrace_code.csv"
    with pytest.raises(sources.PullError, match="not an https URL"):
        sources.pull("azure2023_code", tmp_path, url, progress=False)
    with pytest.raises(sources.PullError, match="not an https URL"):
        sources.pull("azure2023_code", tmp_path, "file:///etc/passwd", progress=False)
    assert cli.main(["pull", "azure2023_code", "--dest", str(tmp_path), "--url", url]) == 2
    assert "--insecure-url" in strict_loads(capsys.readouterr().out)["error"]
    assert list(tmp_path.iterdir()) == []


def test_unpinned_file_is_hashed_on_first_download_and_checked_after(server, tmp_path):
    """azure2024_conv has no published hash: the first download records one, and a later
    download with other bytes is refused (the staged 2023 files stand in for the mirror)."""
    conv = f"{server}/azure_llm/AzureLLMInferenceTrace_conv.csv"
    code = f"{server}/azure_llm/AzureLLMInferenceTrace_code.csv"
    first = sources.pull("azure2024_conv", tmp_path, conv, progress=False, allow_insecure=True)
    assert (first["checksum"], first["verified"]) == ("first", False)
    assert first["sha256"] == sources.REGISTRY["azure2023_conv"].sha256  # the bytes served
    again = sources.pull("azure2024_conv", tmp_path, conv, progress=False, allow_insecure=True)
    assert (again["checksum"], again["verified"]) == ("recorded", True)
    (tmp_path / "AzureLLMInferenceTrace_conv_1week.csv").unlink()
    with pytest.raises(sources.PullError, match="first download"):
        sources.pull("azure2024_conv", tmp_path, code, progress=False, allow_insecure=True)
    assert not (tmp_path / "AzureLLMInferenceTrace_conv_1week.csv").exists()
