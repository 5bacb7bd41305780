"""The served app answers only under the host names its operator configured (DNS rebinding),
and refuses state-changing requests from another origin.

DNS rebinding: a web page at ``evil.example`` that a user of the app visits can make its own
name resolve to ``127.0.0.1`` and then talk to the local server *as the same origin*: the
browser sends ``Host: evil.example:8501`` and ``Origin: http://evil.example:8501``, so a
same-origin check (Streamlit's websocket, the upload route) passes. Refusing every request whose
``Host`` is not a configured name closes that road for pages, websockets and the upload route
alike. On top, a websocket handshake or a request with a method other than GET / HEAD /
OPTIONS that carries an ``Origin`` must come from this server itself (its host and port; a
cross-site form post or websocket from a page that kept its own name is refused, as are
``Origin: null`` and another port of this machine). Clients that send no ``Origin``
(curl, the CLI's tests) are not browsers acting for another site and pass.

Configured names (:func:`allowed_hosts`): ``localhost``, ``127.0.0.1``, ``::1``, the address the
server listens on (``server.address``, unless it is a wildcard), and the comma-separated names
in ``$HEADROOM_ALLOWED_HOSTS`` (e.g. the name a reverse proxy forwards: ``headroom.example.com``;
``*.example.com`` matches subdomains).
"""

from __future__ import annotations

import logging
import os
from urllib.parse import urlsplit

from starlette.responses import PlainTextResponse

log = logging.getLogger("headroom.hostguard")

#: Environment variable with the operator's extra host names (comma-separated).
ENV_HOSTS = "HEADROOM_ALLOWED_HOSTS"
#: Names every server answers to.
LOOPBACK = ("localhost", "127.0.0.1", "::1")
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def allowed_hosts(listen_address: str | None = None) -> list[str]:
    """The host names the app answers under: :data:`LOOPBACK`, ``listen_address`` (default:
    Streamlit's ``server.address``; wildcards ``0.0.0.0`` / ``::`` add nothing) and
    ``$HEADROOM_ALLOWED_HOSTS``."""
    if listen_address is None:
        from streamlit import config

        listen_address = config.get_option("server.address") or ""
    names = list(LOOPBACK)
    if listen_address.strip("[]") not in ("", "0.0.0.0", "::"):
        names.append(listen_address.strip("[]").lower())
    names += [h.strip().lower() for h in os.environ.get(ENV_HOSTS, "").split(",") if h.strip()]
    return list(dict.fromkeys(names))


def _host_ok(host: str, allowed: list[str]) -> bool:
    host = host.lower().strip("[]").rstrip(".")
    return any(host == p or (p.startswith("*.") and host.endswith(p[1:])) for p in allowed)


#: Port of a URL scheme when the URL names none.
_DEFAULT_PORT = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def _where(netloc: str, scheme: str | None) -> tuple[str, int | None] | None:
    """``(host name, port)`` of ``netloc`` (IPv6 brackets removed; without a written port, the
    ``scheme``'s default, or None when no scheme is given), or None when it does not parse."""
    try:
        parts = urlsplit(f"//{netloc}")
        port = parts.port
    except ValueError:
        return None
    if parts.hostname is None or parts.username is not None:
        return None
    return parts.hostname.rstrip("."), port if port is not None else _DEFAULT_PORT.get(scheme)


class HostGuard:
    """ASGI middleware: a request whose ``Host`` is not one of ``allowed`` is refused (400; a
    websocket is closed before it opens), and a websocket handshake or an unsafe method whose
    ``Origin`` is not this server itself (host and port as the request's ``Host`` says, the
    host among ``allowed``) is refused (403): another page on this machine (another port) or
    ``https://localhost`` cannot open the app's websocket either (break-it review)."""

    def __init__(self, app, allowed: list[str] | None = None) -> None:
        self.allowed = [h.lower() for h in (allowed or allowed_hosts())]
        self.app = app
        self._warned: set[str] = set()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        websocket = scope["type"] == "websocket"
        host = _header(scope, b"host") or ""
        here = _where(host, None)  # a Host without a port (behind a proxy): any origin port
        if here is None or not _host_ok(here[0], self.allowed):
            self._refused("host", host)
            await self._refuse(scope, receive, send, 400, "Invalid host header")
            return
        unsafe = websocket or scope.get("method") not in _SAFE_METHODS
        origin = _header(scope, b"origin")
        if unsafe and origin is not None and not self._origin_ok(origin, here):
            self._refused("origin", origin)
            await self._refuse(scope, receive, send, 403, "cross-origin request refused")
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(scope, receive, send, status: int, text: str) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await PlainTextResponse(text, status_code=status)(scope, receive, send)

    def _origin_ok(self, origin: str, here: tuple[str, int | None]) -> bool:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # null, file://, chrome-extension:// ...
        there = _where(parts.netloc, parts.scheme)
        if there is None or not _host_ok(there[0], self.allowed):
            return False
        # the same host and port as the request (behind a proxy that keeps Host, the public
        # name and port; the scheme may differ there: https outside, http to the app)
        return there[0] == here[0] and (there[1] == here[1] or here[1] is None)

    def _refused(self, what: str, value: str | None) -> None:
        """Log a refusal once per distinct value (a hostile page retrying cannot fill the
        log)."""
        key = f"{what}:{value}"[:200]
        if key not in self._warned and len(self._warned) < 100:
            self._warned.add(key)
            log.warning("refused a request with %s %r (not in the allowed hosts %s; add it to "
                        "$%s to serve under it)", what, (value or "")[:100], self.allowed,
                        ENV_HOSTS)


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None
