"""headroom's own ``/metrics`` (issue 29 item 5): the live runs' last bins in the Prometheus
text format (:func:`analytics.live.exposition.metrics_text`), for the operator's Prometheus to
scrape. A GET reads the store once (read-only, a short connection); it serves derived numbers
only, takes no parameter, and reports at most :data:`~analytics.live.exposition.MAX_RUNS` runs.
A store that is busy or missing answers 503 with a plain reason."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

#: The path Prometheus scrapes.
ROUTE = "/metrics"
#: Seconds a scrape waits for a store another process writes (Prometheus' default scrape
#: timeout is 10 s).
SCRAPE_WAIT_S = 5.0


async def metrics(request: Request) -> Response:
    """The exposition, or 503 naming why the store could not be read."""
    from prometheus_client import CONTENT_TYPE_LATEST
    from starlette.concurrency import run_in_threadpool

    from analytics import store
    from analytics.live.exposition import metrics_text
    from analytics.ui.cache import settings

    def read() -> bytes:
        con = store.connect(settings().db_path, read_only=True, migrate_old=True,
                            wait_s=SCRAPE_WAIT_S)
        try:
            return metrics_text(con)
        finally:
            con.close()

    try:
        body = await run_in_threadpool(read)
    except (store.StoreError, OSError) as exc:
        return PlainTextResponse(f"headroom store unavailable: {exc}"[:500], status_code=503)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def routes() -> list[Route]:
    """The route the app's ASGI entry mounts."""
    return [Route(ROUTE, metrics, methods=["GET"])]
