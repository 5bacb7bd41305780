"""Issue 16 item 3: the streamed-upload route (analytics.ui.upload_route) writes the body to
disk as it arrives, caps it while streaming, and refuses unknown tokens, foreign origins and
path-like names; memory does not grow with the body."""

from __future__ import annotations

import asyncio
import hashlib
import json
import tracemalloc
from types import SimpleNamespace

import pytest
from starlette.applications import Starlette

from analytics.ui import upload_route

CHUNK = b"0123456789abcdef" * 4096  # 64 KiB
DISCONNECT = b"<the browser went away>"


def _body(chunks: int):
    for _ in range(chunks):
        yield CHUNK


class Client:
    """Drives the ASGI app directly (Starlette's TestClient needs httpx2, not installed): the
    body is handed over chunk by chunk, as a server receives it."""

    def __init__(self, app):
        self.app = app

    def put(self, path: str, content=b"", headers=None):
        chunks = [content] if isinstance(content, bytes) else content
        declared = [(b"content-length", str(len(content)).encode())] \
            if isinstance(content, bytes) else []
        extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
        return asyncio.run(self._put(path, chunks, [(b"host", b"testserver"), *declared, *extra]))

    async def _put(self, path, chunks, headers):
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "PUT", "scheme": "http", "path": path, "raw_path": path.encode(),
                 "root_path": "", "query_string": b"", "headers": headers,
                 "server": ("testserver", 80), "client": ("127.0.0.1", 5000)}
        source = iter(chunks)
        sent: dict = {"body": b""}

        async def receive():
            chunk = next(source, None)
            if chunk == DISCONNECT:
                return {"type": "http.disconnect"}
            return {"type": "http.request", "body": chunk or b"", "more_body": chunk is not None}

        async def send(message):
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
            elif message["type"] == "http.response.body":
                sent["body"] += message.get("body", b"")

        await self.app(scope, receive, send)
        body = sent["body"]
        return SimpleNamespace(status_code=sent["status"], text=body.decode(),
                               json=lambda: json.loads(body))


@pytest.fixture
def served(tmp_path):
    tokens = upload_route.UploadTokens()
    app = Starlette(routes=upload_route.routes(tokens, tmp_path, cap_bytes=10 * len(CHUNK)))
    yield Client(app), tokens, tmp_path, tokens.issue()


def test_streamed_body_lands_on_disk_and_is_taken_by_id(served):
    client, tokens, folder, token = served
    reply = client.put(f"/headroom/upload/{token}/week.csv.gz", content=_body(3))
    assert reply.status_code == 200, reply.text
    out = reply.json()
    assert out["name"] == "week.csv.gz" and out["bytes"] == 3 * len(CHUNK)
    [staged] = tokens.take(token, [out["id"]])
    assert staged.path.parent == folder and staged.path.name.startswith("upload-")
    assert staged.path.name.endswith(".csv.gz") and "week" not in staged.path.name
    assert staged.path.read_bytes() == CHUNK * 3
    assert staged.sha256 == hashlib.sha256(CHUNK * 3).hexdigest()
    assert tokens.take(token, [out["id"]]) == []  # taken once
    assert not list(folder.glob("*.part"))


def test_over_the_cap_is_413_and_leaves_no_part_file(served):
    client, _, folder, token = served
    reply = client.put(f"/headroom/upload/{token}/big.csv", content=_body(11))  # chunked
    assert reply.status_code == 413
    assert "upload cap" in reply.json()["error"]
    assert list(folder.iterdir()) == []
    declared = client.put(f"/headroom/upload/{token}/big.csv", content=CHUNK * 11)
    assert declared.status_code == 413  # refused on Content-Length before reading
    assert list(folder.iterdir()) == []


def test_a_session_holds_a_bounded_number_of_pending_uploads(served, monkeypatch):
    client, tokens, folder, token = served
    monkeypatch.setattr(upload_route, "MAX_PENDING", 2)
    codes = [client.put(f"/headroom/upload/{token}/a.csv", content=b"x").status_code
             for _ in range(3)]
    assert codes == [200, 200, 429]
    assert len(list(folder.iterdir())) == 2


def test_a_client_gone_mid_body_leaves_no_file(served):
    client, tokens, folder, token = served
    reply = client.put(f"/headroom/upload/{token}/a.csv", content=[CHUNK, CHUNK, DISCONNECT])
    assert reply.status_code == 400
    assert list(folder.iterdir()) == []


def test_unknown_token_foreign_origin_and_path_names_are_refused(served):
    client, tokens, folder, token = served
    assert client.put("/headroom/upload/guess/a.csv", content=b"x").status_code == 403
    foreign = client.put(f"/headroom/upload/{token}/a.csv", content=b"x",
                         headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403
    same = client.put(f"/headroom/upload/{token}/a.csv", content=b"x",
                      headers={"Origin": "http://testserver"})
    assert same.status_code == 200
    tokens.take(token, [same.json()["id"]])[0].path.unlink()
    for name in (".bashrc", "..", "a\\b.csv", "x\ny.csv", "a/../b.csv"):
        reply = client.put(f"/headroom/upload/{token}/{name}", content=b"x")
        assert reply.status_code in (400, 404), name  # a '/' in the name matches no route
    assert list(folder.iterdir()) == []
    assert not upload_route.plain_name("../etc/passwd") and upload_route.plain_name("a b.csv")


def test_expired_token_drops_its_staged_files(tmp_path):
    tokens = upload_route.UploadTokens(ttl_s=-1.0)  # every token expires at once
    token = tokens.issue()
    assert not tokens.known(token)
    staged = tmp_path / "upload-x.csv"
    staged.write_bytes(b"x")
    token = tokens.issue()
    assert tokens.add(token, upload_route.Staged(staged, "x.csv", 1, "0")) is not None
    tokens.issue()  # the next session's token: the expired one's file goes
    assert not staged.exists()


def test_streaming_200_mb_keeps_memory_flat(tmp_path):
    """200 MB streamed in 64 KiB chunks: Python allocations stay far below the body."""
    tokens = upload_route.UploadTokens()
    app = Starlette(routes=upload_route.routes(tokens, tmp_path, cap_bytes=400 * 2**20))
    chunks = 200 * 2**20 // len(CHUNK)
    client, token = Client(app), tokens.issue()
    tracemalloc.start()
    reply = client.put(f"/headroom/upload/{token}/big.csv", content=_body(chunks))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert reply.status_code == 200 and reply.json()["bytes"] == chunks * len(CHUNK)
    assert peak < 20 * 2**20  # the body is 200 MiB; measured: peak 0.02 MiB
    tokens.take(token, [reply.json()["id"]])[0].path.unlink()


def test_staged_uploads_are_ingested_or_refused_with_line_and_column_then_deleted(tmp_path):
    """The service path the Data page takes for the streamed files: a good file ingested, a
    bad one refused naming file, line and column; both deleted from the upload folder."""
    import shutil

    from harness import case_file, shared

    from analytics import store
    from analytics.config import ParseOptions
    from analytics.services import data

    good = tmp_path / "upload-1.csv"
    shutil.copy(shared("azure_llm/AzureLLMInferenceTrace_conv.csv"), good)
    bad = tmp_path / "upload-2.csv"
    shutil.copy(case_file("malformed/m09_duplicate_header_names.csv"), bad)
    con = store.connect(tmp_path / "s.duckdb")
    try:
        results = data.ingest_staged(con, [(good, "AzureLLMInferenceTrace_conv.csv", None),
                                           (bad, "m09_duplicate_header_names.csv", None)],
                                     ParseOptions(), 400 * 10**6)
    finally:
        con.close()
    assert [r["status"] for r in results] == ["ingested", "rejected"]
    assert results[0]["dataset"] == "AzureLLMInferenceTrace_conv" and results[0]["rows"] == 19_366
    assert results[1]["error"].startswith("m09_duplicate_header_names.csv: line 1, column")
    assert not good.exists() and not bad.exists()


def test_untaken_uploads_expire_and_a_server_wide_disk_cap_holds(served, monkeypatch):
    """Issue 34 (break-it review): a finished upload no page takes is deleted after
    ``STAGED_TTL_S``, and finished uploads of every session together may hold at most
    ``$HEADROOM_UPLOAD_PENDING_MB`` of disk (503 beyond)."""
    client, tokens, folder, token = served
    monkeypatch.setenv("HEADROOM_UPLOAD_PENDING_MB", str(1.5 * len(CHUNK) / 1e6))
    assert client.put(f"/headroom/upload/{token}/a.csv", content=CHUNK).status_code == 200
    other = tokens.issue()
    assert client.put(f"/headroom/upload/{other}/b.csv", content=CHUNK).status_code == 200
    full = client.put(f"/headroom/upload/{other}/c.csv", content=CHUNK)
    assert full.status_code == 503 and "too many uploads" in full.json()["error"]
    monkeypatch.setattr(upload_route, "STAGED_TTL_S", 0.0)
    tokens.issue(token)  # any issue or lookup expires what is due
    assert list(folder.iterdir()) == []
    assert tokens.pending(token) == tokens.pending(other) == 0

