"""Raw counter samples from the Prometheus HTTP API (``/api/v1/query`` with a range selector:
the stored samples themselves, not ``query_range``'s step-evaluated values, so bins add up to
the tokens the engine counted).

Metric names are the engines' own (looked up in their docs and exporters, not guessed):
vLLM ``vllm:prompt_tokens_total`` / ``vllm:generation_tokens_total`` (older releases expose the
same counters without ``_total``), SGLang ``sglang:prompt_tokens_total`` /
``sglang:generation_tokens_total``, all labelled ``model_name``. Every request has a timeout,
an answer is read up to :data:`MAX_BYTES`, and a window is read in chunks of :data:`CHUNK_S`.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

import numpy as np

#: Counter names per engine and token kind, the current name first.
COUNTERS = {
    "vllm": {"prompt": ("vllm:prompt_tokens_total", "vllm:prompt_tokens"),
             "completion": ("vllm:generation_tokens_total", "vllm:generation_tokens")},
    "sglang": {"prompt": ("sglang:prompt_tokens_total",),
               "completion": ("sglang:generation_tokens_total",)},
}
#: Largest answer read from Prometheus (bytes); a larger one is refused, naming the query.
MAX_BYTES = 64 * 2**20
#: Seconds of samples asked for in one query (a week of 15-s scrapes of a few series is small).
CHUNK_S = 6 * 3600


class SourceError(Exception):
    """Prometheus did not answer, answered an error, or answered what is not a sample series
    (the message names the URL path, the query and the series)."""


@dataclass(frozen=True)
class Series:
    """One counter series: ``name`` (metric), ``kind`` (``prompt`` / ``completion``),
    ``labels``, sample times ``ts_s`` (UNIX s, ascending) and ``values``."""

    name: str
    kind: str
    labels: tuple
    ts_s: np.ndarray
    values: np.ndarray


class PrometheusSource:
    """The operator's Prometheus server at ``url`` (``http://host:9090``).

    Parameters
    ----------
    url : base URL of the server (operator configuration)
    timeout_s : seconds one HTTP request may take
    """

    def __init__(self, url: str, timeout_s: float = 10.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SourceError(f"{url!r} is not an http(s) URL of a Prometheus server")
        self.url, self.timeout_s = url.rstrip("/"), float(timeout_s)

    def _get(self, path: str, params: dict) -> dict:
        full = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(full, timeout=self.timeout_s) as resp:  # noqa: S310
                body = resp.read(MAX_BYTES + 1)
        except urllib.error.HTTPError as exc:
            detail = exc.read(2000).decode("utf-8", "replace")
            raise SourceError(f"Prometheus {path} answered HTTP {exc.code}: {detail[:300]}") \
                from exc
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise SourceError(f"Prometheus at {self.url} did not answer {path} within "
                              f"{self.timeout_s:g} s: {exc}") from exc
        if len(body) > MAX_BYTES:
            raise SourceError(f"Prometheus {path} answered more than {MAX_BYTES // 2**20} MiB "
                              f"for {params.get('query', '')!r}: read a shorter window")
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise SourceError(f"Prometheus {path} answered what is not JSON: {exc}") from exc
        if doc.get("status") != "success":
            raise SourceError(f"Prometheus {path} refused {params.get('query', '')!r}: "
                              f"{doc.get('errorType')}: {doc.get('error')}")
        return doc["data"]

    def counters(self, engine: str, model: str, start_s: float, end_s: float) -> list[Series]:
        """Every sample in ``(start_s, end_s]`` of the engine's token counters for ``model``
        (label ``model_name``), one :class:`Series` per metric and label set.

        Raises SourceError (no answer, an error, a value that is not a finite number: the series
        and time are named) and ValueError (an unknown engine)."""
        if engine not in COUNTERS:
            raise ValueError(f"unknown engine {engine!r}: one of {', '.join(COUNTERS)}")
        kind_of = {n: k for k, names in COUNTERS[engine].items() for n in names}
        names = "|".join(kind_of)  # metric names hold letters, digits, '_' and ':' only
        model_q = model.replace("\\", "\\\\").replace('"', '\\"')
        merged: dict[tuple, list] = {}
        t = start_s
        while t < end_s:
            stop = min(t + CHUNK_S, end_s)
            span = max(int(math.ceil(stop - t)), 1)
            query = f'{{__name__=~"{names}",model_name="{model_q}"}}[{span}s]'
            data = self._get("/api/v1/query", {"query": query, "time": f"{stop:.3f}"})
            if data.get("resultType") != "matrix":
                raise SourceError(f"Prometheus answered {data.get('resultType')!r} for {query!r}, "
                                  "not a matrix of samples")
            for item in data.get("result", []):
                labels = dict(item.get("metric", {}))
                name = labels.pop("__name__", "")
                key = (name, tuple(sorted(labels.items())))
                for stamp, raw in item.get("values", []):
                    try:
                        value = float(raw)
                    except (TypeError, ValueError):
                        value = math.nan
                    if not math.isfinite(value) or value < 0:
                        raise SourceError(f"series {name}{labels} at {float(stamp):.3f}: "
                                          f"{raw!r} is not a counter value")
                    merged.setdefault(key, []).append((float(stamp), value))
            t = stop
        out = []
        for (name, labels), pts in sorted(merged.items()):
            pts = sorted(set(pts))
            out.append(Series(name, kind_of.get(name, "prompt"), labels,
                              np.array([p[0] for p in pts]), np.array([p[1] for p in pts])))
        return out
