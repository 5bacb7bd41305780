"""Streamed browser uploads (issue 16, item 3): an HTTP route that writes a request body to
disk as it arrives, so a large upload never sits in server memory.

``st.file_uploader`` keeps every uploaded file whole in the server's memory (Streamlit's
``MemoryUploadedFileManager``; no to-disk mode, streamlit/streamlit#10828), so the Data page's
"Large files" widget (:mod:`analytics.ui.bigupload`) sends each file with one
``PUT /headroom/upload/{token}/{name}`` instead, served by :func:`routes` on the app's ASGI
entry (``serve.py``, ``st.App``). The body is written in chunks to ``upload-<id>.part`` in
``Settings.upload_dir`` (the folder the app cleans of stale ``upload-*`` files on start),
hashed on the way, refused with 413 once it passes ``server.maxUploadSize`` (the part file
removed), and renamed to ``upload-<id><suffix>`` when complete. The answer is JSON
``{"id", "name", "bytes"}``; the page then ingests the file by its id (never by a path the
browser sends) and deletes it.

Security: ``token`` is a capability the Data page creates per browser session
(``secrets.token_urlsafe``) and registers here with an expiry (:class:`UploadTokens`); an
unknown or expired token is refused (403), as is a request whose ``Origin`` does not name this
server's ``Host`` (403). ``name`` is only a label: it must be a plain base name (no path
separator, no leading dot, at most 255 characters; else 400), and the file is written under a
generated name. A session holds at most :data:`MAX_PENDING` finished uploads the page has not
yet ingested (429). Nothing uploaded is executed or unpickled.
"""

from __future__ import annotations

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

from analytics.config import Settings

#: Where the route listens (``{token}`` and ``{name}`` are path parameters).
ROUTE = "/headroom/upload/{token}/{name}"
#: Seconds a session's token stays valid after the Data page last drew the widget.
TOKEN_TTL_S = 3600.0
#: Finished uploads a session may hold on disk before the page has ingested them (more: 429).
MAX_PENDING = 20
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


@dataclass
class _Session:
    expires: float
    staged: dict[str, Staged] = field(default_factory=dict)


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
        """Finished uploads of ``token`` not yet taken by the page."""
        with self._lock:
            session = self._sessions.get(token)
            return 0 if session is None else len(session.staged)

    def add(self, token: str, staged: Staged) -> str | None:
        """Record a finished upload under ``token``; returns its id, or None when the token
        expired meanwhile (the caller deletes the file)."""
        with self._lock:
            session = self._sessions.get(token)
            if session is None:
                return None
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
        now = time.monotonic()
        for token in [t for t, s in self._sessions.items() if s.expires < now]:
            for staged in self._sessions.pop(token).staged.values():
                staged.path.unlink(missing_ok=True)


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
    mid-body), 403 (token, origin), 413 (over ``server.maxUploadSize``), 429 (the session
    already holds :data:`MAX_PENDING` uploads not yet ingested). ``tokens``, ``folder``
    and ``cap_bytes`` default to :data:`TOKENS`, ``Settings.upload_dir`` and the server's cap."""
    tokens = tokens or TOKENS
    token, name = request.path_params["token"], request.path_params["name"]
    if not _same_origin(request):
        return _error(403, "cross-origin upload refused")
    if not tokens.known(token):
        return _error(403, "unknown or expired upload token: reload the Data page")
    if not plain_name(name):
        return _error(400, "the file name must be a plain base name")
    if tokens.pending(token) >= MAX_PENDING:
        return _error(429, f"{MAX_PENDING} uploads are waiting to be ingested: reload the page")
    cap = _cap_bytes() if cap_bytes is None else cap_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        return _error(413, f"file larger than the upload cap ({cap // 2**20} MB)")
    folder = Path(folder or Settings.from_env().upload_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"upload-{uuid.uuid4().hex}"
    part, final = folder / f"{stem}.part", folder / f"{stem}{_suffix(name)}"
    hasher, size = hashlib.sha256(), 0
    try:
        with open(part, "xb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > cap:
                    raise _TooLarge
                hasher.update(chunk)
                out.write(chunk)
        os.replace(part, final)  # atomic: a finished name is always a whole file
    except _TooLarge:
        part.unlink(missing_ok=True)
        return _error(413, f"file larger than the upload cap ({cap // 2**20} MB)")
    except ClientDisconnect:
        part.unlink(missing_ok=True)
        return _error(400, "the upload stopped before its end")
    except BaseException:  # client gone, disk full, server stopping: leave nothing behind
        part.unlink(missing_ok=True)
        raise
    upload_id = tokens.add(token, Staged(final, name, size, hasher.hexdigest()))
    if upload_id is None:
        final.unlink(missing_ok=True)
        return _error(403, "upload token expired during the upload: reload the Data page")
    return JSONResponse({"id": upload_id, "name": name, "bytes": size})


class _TooLarge(Exception):
    pass


def routes(tokens: UploadTokens | None = None, folder: Path | None = None,
           cap_bytes: int | None = None) -> list[Route]:
    """The Starlette routes the app's ASGI entry mounts beside Streamlit's (arguments as
    :func:`put_upload`; tests pass their own)."""
    async def endpoint(request: Request) -> JSONResponse:
        return await put_upload(request, tokens, folder, cap_bytes)

    return [Route(ROUTE, endpoint, methods=["PUT"])]
