"""Streamed browser uploads (issue 16, item 3): an HTTP route that writes a request body to
disk as it arrives, so a large upload never sits in server memory.

``st.file_uploader`` keeps every uploaded file whole in the server's memory (Streamlit's
``MemoryUploadedFileManager``; no to-disk mode, streamlit/streamlit#10828), so the Data page's
"Large files" widget (:mod:`analytics.ui.bigupload`) sends each file with one
``PUT /headroom/upload/{token}/{name}`` instead, served by :func:`routes` on the app's ASGI
entry (``serve.py``, ``st.App``). The body is written in chunks to ``upload-<pid>-<id>.part``
in ``Settings.upload_dir`` (at start the server removes the files of a server process that is
gone: :mod:`analytics.ui.startup`),
hashed on the way, refused with 413 once it passes ``server.maxUploadSize`` (the part file
removed), and renamed to ``upload-<id><suffix>`` when complete. The answer is JSON
``{"id", "name", "bytes"}``; the page then ingests the file by its id (never by a path the
browser sends) and deletes it.

Security: ``token`` is a capability the Data page creates per browser session
(``secrets.token_urlsafe``) and registers here with an expiry (:class:`UploadTokens`); an
unknown or expired token is refused (403), as is a request whose ``Origin`` does not name this
server's ``Host`` (403). ``name`` is only a label: it must be a plain base name (no path
separator, no leading dot, at most 255 characters; else 400), and the file is written under a
generated name. A session holds at most :data:`MAX_PENDING` uploads in flight or finished and
not yet ingested, counted atomically when a request starts (429: 40 simultaneous PUTs on one
token once got past a check made before the body was read), and the server at most
:data:`MAX_IN_FLIGHT` bodies at a time (503). A body that sends nothing for
:func:`idle_timeout_s` seconds is cut off (408, part file removed): slow bodies held open
(slowloris) once ran the server out of file descriptors. Nothing uploaded is executed or
unpickled.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from analytics import tempfiles
from analytics.config import Settings, env_number

#: Where the route listens (``{token}`` and ``{name}`` are path parameters).
ROUTE = "/headroom/upload/{token}/{name}"
#: Seconds a session's token stays valid after the Data page last drew the widget.
TOKEN_TTL_S = 3600.0
#: Uploads a session may have in flight or finished on disk before the page has ingested them
#: (more: 429).
MAX_PENDING = 20
#: Bodies the whole server receives at once, every session together (more: 503).
MAX_IN_FLIGHT = 64
#: Default seconds a body may send nothing before it is cut off (``$HEADROOM_UPLOAD_IDLE_S``).
IDLE_TIMEOUT_S = 30.0
#: Default slowest average a body may keep after its first idle-timeout seconds, KB/s
#: (``$HEADROOM_UPLOAD_MIN_KBPS``): a byte every 20 s kept 64 bodies open past any idle timeout.
MIN_RATE_KBPS = 16.0
#: Default disk (MB) the finished uploads no page has taken yet may hold, every session
#: together (``$HEADROOM_UPLOAD_PENDING_MB``; more: 503).
PENDING_MB = 2000.0
#: Seconds a finished upload waits for its page to take it (a page takes it on its next run,
#: at once; a browser closed mid-way left its files for the token's hour).
STAGED_TTL_S = 600.0
#: Characters a kept file suffix may hold (``.csv``, ``.csv.gz``, ``.parquet`` ...).
_SUFFIX = re.compile(r"^(\.[A-Za-z0-9]{1,10}){1,2}$")


@dataclass
class Staged:
    """A finished upload on disk: ``path`` (generated name), the user's ``name``, ``bytes``,
    ``sha256`` (hex, computed while the body was written)."""

    path: Path
    name: str
    bytes: int
    sha256: str
    finished: float = field(default_factory=time.monotonic)


@dataclass
class _Session:
    expires: float
    staged: dict[str, Staged] = field(default_factory=dict)
    in_flight: int = 0


def idle_timeout_s() -> float:
    """Seconds a streamed body may send nothing: ``$HEADROOM_UPLOAD_IDLE_S`` (default
    :data:`IDLE_TIMEOUT_S`)."""
    return env_number("HEADROOM_UPLOAD_IDLE_S", IDLE_TIMEOUT_S)


def min_rate_bytes_s() -> float:
    """Slowest average (bytes/s) a body may keep: ``$HEADROOM_UPLOAD_MIN_KBPS`` x 1,000."""
    return env_number("HEADROOM_UPLOAD_MIN_KBPS", MIN_RATE_KBPS) * 1000


def pending_cap_bytes() -> int:
    """Disk the finished, not yet taken uploads may hold: ``$HEADROOM_UPLOAD_PENDING_MB``."""
    return int(env_number("HEADROOM_UPLOAD_PENDING_MB", PENDING_MB) * 1_000_000)


class UploadTokens:
    """Per-session upload capabilities and the files uploaded under each (thread-safe: the
    route runs on the server's event loop, the page in a script thread).

    An expired token's staged files are deleted when any token is next issued or looked up.
    """

    def __init__(self, ttl_s: float = TOKEN_TTL_S) -> None:
        self._ttl_s = ttl_s
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}

    def issue(self, token: str | None = None) -> str:
        """Renew ``token`` (when still known) or create a new unguessable one; returns it."""
        with self._lock:
            self._expire()
            if token not in self._sessions:
                token = secrets.token_urlsafe(32)
                self._sessions[token] = _Session(0.0)
            self._sessions[token].expires = time.monotonic() + self._ttl_s
            return token

    def known(self, token: str) -> bool:
        """Whether ``token`` is a live capability."""
        with self._lock:
            self._expire()
            return token in self._sessions

    def pending(self, token: str) -> int:
        """Uploads of ``token`` in flight or finished and not yet taken by the page."""
        with self._lock:
            session = self._sessions.get(token)
            return 0 if session is None else len(session.staged) + session.in_flight

    def in_flight(self) -> int:
        """Bodies being received now, every session together."""
        with self._lock:
            return sum(s.in_flight for s in self._sessions.values())

    def reserve(self, token: str, limit: int, server_limit: int) -> str | None:
        """Take a slot for one upload of ``token`` in one step (check and count under the
        lock, so simultaneous requests cannot all pass the check); returns None when granted,
        else why not: ``"token"`` (unknown or expired), ``"session"`` (``limit`` uploads in
        flight or pending), ``"server"`` (``server_limit`` bodies in flight). A granted slot
        is given back by :meth:`add` or :meth:`release`."""
        with self._lock:
            self._expire()
            session = self._sessions.get(token)
            if session is None:
                return "token"
            if len(session.staged) + session.in_flight >= limit:
                return "session"
            if sum(s.in_flight for s in self._sessions.values()) >= server_limit or sum(
                    f.bytes for s in self._sessions.values() for f in s.staged.values()
                    ) >= pending_cap_bytes():
                return "server"
            session.in_flight += 1
            return None

    def release(self, token: str) -> None:
        """Give back a slot of :meth:`reserve` (the upload failed or was refused)."""
        with self._lock:
            session = self._sessions.get(token)
            if session is not None and session.in_flight > 0:
                session.in_flight -= 1

    def add(self, token: str, staged: Staged) -> str | None:
        """Record a finished upload under ``token`` (its slot becomes a pending file); returns
        its id, or None when the token expired meanwhile (the caller deletes the file)."""
        with self._lock:
            session = self._sessions.get(token)
            if session is None:
                return None
            session.in_flight = max(0, session.in_flight - 1)
            upload_id = uuid.uuid4().hex
            session.staged[upload_id] = staged
            return upload_id

    def take(self, token: str, ids) -> list[Staged]:
        """Remove and return the uploads ``ids`` of ``token`` (ids it does not hold are
        ignored: a browser can only name its own session's files)."""
        with self._lock:
            session = self._sessions.get(token)
            if session is None:
                return []
            return [s for i in ids if isinstance(i, str)
                    and (s := session.staged.pop(i, None)) is not None]

    def _expire(self) -> None:
        """Drop expired tokens with their files, and files no page took within
        :data:`STAGED_TTL_S`."""
        now = time.monotonic()
        for token in [t for t, s in self._sessions.items() if s.expires < now]:
            for staged in self._sessions.pop(token).staged.values():
                staged.path.unlink(missing_ok=True)
        for session in self._sessions.values():
            for upload_id in [i for i, f in session.staged.items()
                              if now - f.finished > STAGED_TTL_S]:
                session.staged.pop(upload_id).path.unlink(missing_ok=True)


#: The process's registry: the route and the Data page run in the same server process.
TOKENS = UploadTokens()


def plain_name(name: str) -> bool:
    """Whether ``name`` is a plain base name: 1-255 characters, no path separator, no leading
    dot, no control character."""
    return (0 < len(name) <= 255 and not name.startswith(".") and "/" not in name
            and "\\" not in name and not any(ord(c) < 32 or ord(c) == 127 for c in name))


def _suffix(name: str) -> str:
    suffix = "".join(Path(name).suffixes[-2:]).lower()
    return suffix if _SUFFIX.match(suffix) else ""


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if not origin:  # not a browser's cross-site request (curl, a test client)
        return True
    return urlsplit(origin).netloc.lower() == request.headers.get("host", "").lower()


def _cap_bytes() -> int:
    from streamlit import config

    return int(config.get_option("server.maxUploadSize")) * 1024 * 1024


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def put_upload(request: Request, tokens: UploadTokens | None = None,
                     folder: Path | None = None, cap_bytes: int | None = None) -> JSONResponse:
    """``PUT /headroom/upload/{token}/{name}``: stream the body to disk (see the module
    docstring). Answers 200 ``{"id", "name", "bytes"}``, 400 (name; the client stopped
    mid-body), 403 (token, origin), 408 (the body sent nothing for :func:`idle_timeout_s`
    seconds), 413 (over ``server.maxUploadSize``), 429 (the session already has
    :data:`MAX_PENDING` uploads in flight or not yet ingested), 503 (:data:`MAX_IN_FLIGHT`
    bodies in flight on the server). ``tokens``, ``folder`` and ``cap_bytes`` default to
    :data:`TOKENS`, ``Settings.upload_dir`` and the server's cap."""
    tokens = tokens or TOKENS
    token, name = request.path_params["token"], request.path_params["name"]
    if not _same_origin(request):
        return _error(403, "cross-origin upload refused")
    if not plain_name(name):
        return _error(400, "the file name must be a plain base name")
    cap = _cap_bytes() if cap_bytes is None else cap_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        return _error(413, f"file larger than the upload cap ({cap // 2**20} MB)")
    refused = tokens.reserve(token, MAX_PENDING, MAX_IN_FLIGHT)
    if refused == "token":
        return _error(403, "unknown or expired upload token: reload the Data page")
    if refused == "session":
        return _error(429, f"{MAX_PENDING} uploads are in flight or waiting to be ingested: "
                           "wait for them, or reload the page")
    if refused == "server":
        return _error(503, "the server is receiving too many uploads at once: try again later")
    try:
        staged = await _receive(request, Path(folder or Settings.from_env().upload_dir), name,
                                cap)
    except _Refused as exc:
        tokens.release(token)
        return _error(exc.status, exc.message)
    except BaseException:
        tokens.release(token)
        raise
    upload_id = tokens.add(token, staged)
    if upload_id is None:
        staged.path.unlink(missing_ok=True)
        return _error(403, "upload token expired during the upload: reload the Data page")
    return JSONResponse({"id": upload_id, "name": name, "bytes": staged.bytes})


async def _receive(request: Request, folder: Path, name: str, cap: int) -> Staged:
    """Write the body to ``folder`` chunk by chunk, hashing it; each chunk must come within
    :func:`idle_timeout_s`. Raises :class:`_Refused` (the part file removed)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{tempfiles.prefix('upload')}{uuid.uuid4().hex}"
    part, final = folder / f"{stem}.part", folder / f"{stem}{_suffix(name)}"
    hasher, size, idle, rate = hashlib.sha256(), 0, idle_timeout_s(), min_rate_bytes_s()
    started = time.monotonic()
    try:
        with open(part, "xb") as out:
            chunks = request.stream().__aiter__()
            while True:
                try:
                    chunk = await asyncio.wait_for(chunks.__anext__(), idle)
                except StopAsyncIteration:
                    break
                size += len(chunk)
                late = time.monotonic() - started - idle
                if late > 0 and size < rate * late:  # a trickle: each chunk just in time
                    raise _Refused(408, f"the upload arrived slower than {rate / 1000:g} KB/s "
                                        "and was cut off")
                if size > cap:
                    raise _Refused(413, f"file larger than the upload cap ({cap // 2**20} MB)")
                hasher.update(chunk)
                out.write(chunk)
        os.replace(part, final)  # atomic: a finished name is always a whole file
    except TimeoutError:
        part.unlink(missing_ok=True)
        raise _Refused(408, f"the upload sent nothing for {idle:g} s and was cut off") from None
    except ClientDisconnect:
        part.unlink(missing_ok=True)
        raise _Refused(400, "the upload stopped before its end") from None
    except BaseException:  # too large, client gone, disk full, server stopping: leave nothing
        part.unlink(missing_ok=True)
        raise
    return Staged(final, name, size, hasher.hexdigest())


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        self.status, self.message = status, message
        super().__init__(message)


def routes(tokens: UploadTokens | None = None, folder: Path | None = None,
           cap_bytes: int | None = None) -> list[Route]:
    """The Starlette routes the app's ASGI entry mounts beside Streamlit's (arguments as
    :func:`put_upload`; tests pass their own)."""
    async def endpoint(request: Request) -> JSONResponse:
        return await put_upload(request, tokens, folder, cap_bytes)

    return [Route(ROUTE, endpoint, methods=["PUT"])]


#: Largest file (MB) the plain ``st.file_uploader`` takes (``$HEADROOM_PLAIN_UPLOAD_MB``):
#: Streamlit keeps each such file whole in server memory (a 332 MB file peaked at 1,273 MB and
#: kept 707 MB per session), so larger files go through the streamed route above.
PLAIN_UPLOAD_MB = 50
#: Bytes of multipart framing allowed on top of the file itself.
_MULTIPART_SLACK = 64 * 1024
#: Streamlit's own upload endpoint (``/_stcore/upload_file/{session_id}/{file_id}``).
_PLAIN_PATH = "/_stcore/upload_file/"


def plain_upload_mb() -> int:
    """The plain uploader's cap in MB: ``$HEADROOM_PLAIN_UPLOAD_MB``, default
    :data:`PLAIN_UPLOAD_MB`, never above ``server.maxUploadSize``."""
    from streamlit import config

    want = int(env_number("HEADROOM_PLAIN_UPLOAD_MB", PLAIN_UPLOAD_MB))
    return max(1, min(want, int(config.get_option("server.maxUploadSize"))))


class PlainUploadCap:
    """ASGI middleware: a PUT to Streamlit's upload endpoint must declare a Content-Length of at
    most :func:`plain_upload_mb` (plus multipart framing) and no ``Transfer-Encoding``, else
    413 before any byte is read. The widget's own ``max_upload_size`` says so in the browser;
    this holds for any client: the server reads a body by its chunked encoding when one is
    declared, whatever Content-Length says (the break-it review sent ``Content-Length: 10``
    with a 390 MB chunked body), and by Content-Length otherwise."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if (scope["type"] == "http" and scope.get("method") == "PUT"
                and _PLAIN_PATH in scope.get("path", "")):
            headers = dict(scope.get("headers", ()))
            declared = headers.get(b"content-length", b"")
            cap = plain_upload_mb() * 1024 * 1024 + _MULTIPART_SLACK
            if b"transfer-encoding" in headers or not declared.isdigit() or int(declared) > cap:
                message = (f"files over {plain_upload_mb()} MB go through the Data page's "
                           "'Large files (streamed to disk)' uploader")
                await JSONResponse({"error": message}, status_code=413)(scope, receive, send)
                return
        await self.app(scope, receive, send)

