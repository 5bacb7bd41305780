"""The served app answers only under the host names its operator configured (DNS rebinding),
and refuses state-changing requests from another origin.

DNS rebinding: a web page at ``evil.example`` that a user of the app visits can make its own
name resolve to ``127.0.0.1`` and then talk to the local server *as the same origin*: the
browser sends ``Host: evil.example:8501`` and ``Origin: http://evil.example:8501``, so a
same-origin check (Streamlit's websocket, the upload route) passes. Refusing every request whose
``Host`` is not a configured name closes that road for pages, websockets and the upload route
alike (Starlette's :class:`~starlette.middleware.trustedhost.TrustedHostMiddleware`). On top,
a websocket handshake or a request with a method other than GET / HEAD / OPTIONS that carries
an ``Origin`` must name a configured host too (a cross-site form post or websocket from a page
that kept its own name is refused; ``Origin: null`` as well). Clients that send no ``Origin``
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

from starlette.middleware.trustedhost import TrustedHostMiddleware
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
    host = host.lower().strip("[]")
    return any(host == p or (p.startswith("*.") and host.endswith(p[1:])) for p in allowed)


class HostGuard:
    """ASGI middleware: :class:`TrustedHostMiddleware` on ``allowed`` (400 for another ``Host``,
    a websocket closed before it opens), then the ``Origin`` check on websocket handshakes and
    unsafe methods (403)."""

    def __init__(self, app, allowed: list[str] | None = None) -> None:
        self.allowed = [h.lower() for h in (allowed or allowed_hosts())]
        self.app = app
        self.hosts = TrustedHostMiddleware(self._origin_checked, allowed_hosts=self.allowed,
                                           www_redirect=False)
        self._warned: set[str] = set()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "websocket":
            host = _header(scope, b"host")
            name = urlsplit(f"//{host}").hostname or ""
            if not _host_ok(name, self.allowed):
                self._refused("host", host)
                await send({"type": "websocket.close", "code": 1008})
                return
        await self.hosts(scope, receive, send)

    async def _origin_checked(self, scope, receive, send) -> None:
        if scope["type"] in ("http", "websocket"):
            unsafe = scope["type"] == "websocket" or scope.get("method") not in _SAFE_METHODS
            origin = _header(scope, b"origin")
            if unsafe and origin is not None and not self._origin_ok(origin):
                self._refused("origin", origin)
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                else:
                    await PlainTextResponse("cross-origin request refused",
                                            status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _origin_ok(self, origin: str) -> bool:
        name = urlsplit(origin).hostname
        return name is not None and _host_ok(name, self.allowed)

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
