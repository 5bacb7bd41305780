"""Raw counter samples from the Prometheus HTTP API (``/api/v1/query`` with a range selector:
the stored samples themselves, not ``query_range``'s step-evaluated values, so bins add up to
the tokens the engine counted).

Metric names are the engines' own (looked up in their docs and exporters, not guessed):
vLLM ``vllm:prompt_tokens_total`` / ``vllm:generation_tokens_total`` (older releases expose the
same counters without ``_total``), SGLang ``sglang:prompt_tokens_total`` /
``sglang:generation_tokens_total``, all labelled ``model_name``; their serving metrics
(:data:`SERVING`) and DCGM's energy counter and power gauge. Every request has a timeout,
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
#: The serving metrics per engine, each stat's current name first (vLLM's production metrics
#: and ``docs/design/metrics.md``; SGLang's ``srt/metrics/collector.py``): a counter of
#: finished requests, gauges of running and queued requests and of KV-cache usage (a fraction,
#: 0-1), and latency histograms (seconds; read as their ``_bucket`` series) of TTFT, the
#: inter-token latency (TBT / ITL; ``time_per_output_token`` in older releases) and end-to-end.
SERVING = {
    "vllm": {"requests": ("vllm:request_success_total", "vllm:request_success"),
             "running": ("vllm:num_requests_running",),
             "waiting": ("vllm:num_requests_waiting",),
             "kv_cache": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
             "ttft": ("vllm:time_to_first_token_seconds",),
             "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
             "e2e": ("vllm:e2e_request_latency_seconds",)},
    "sglang": {"requests": ("sglang:num_requests_total",),
               "running": ("sglang:num_running_reqs",),
               "waiting": ("sglang:num_queue_reqs",),
               "kv_cache": ("sglang:token_usage",),
               "ttft": ("sglang:time_to_first_token_seconds",),
               "itl": ("sglang:inter_token_latency_seconds",
                       "sglang:time_per_output_token_seconds"),
               "e2e": ("sglang:e2e_request_latency_seconds",)},
}
#: The stats of :data:`SERVING` that are histograms (their samples are ``<name>_bucket``).
HISTOGRAMS = ("ttft", "itl", "e2e")


def serving_names(engine: str) -> dict[str, str]:
    """Metric sample name -> stat of :data:`SERVING` for ``engine`` (a histogram's
    ``_bucket`` series). Raises ValueError for an unknown engine."""
    if engine not in SERVING:
        raise ValueError(f"unknown engine {engine!r}: one of {', '.join(SERVING)}")
    return {(f"{n}_bucket" if stat in HISTOGRAMS else n): stat
            for stat, names in SERVING[engine].items() for n in names}


#: Largest answer read from Prometheus (bytes); a larger one is refused, naming the query.
MAX_BYTES = 64 * 2**20
#: Seconds of samples asked for in one query (a week of 15-s scrapes of a few series is small).
CHUNK_S = 6 * 3600


class SourceError(Exception):
    """Prometheus did not answer, answered an error, or answered what is not a sample series
    (the message names the URL path, the query and the series)."""


@dataclass(frozen=True)
class Series:
    """One sample series: ``name`` (metric), ``kind`` (``prompt`` / ``completion`` for the token
    counters, the stat of :data:`SERVING` for a serving metric), ``labels``, sample times
    ``ts_s`` (UNIX s, ascending) and ``values``."""

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
        self.url = check_url(url, "a Prometheus server").rstrip("/")
        self.timeout_s = float(timeout_s)

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
            raise SourceError(_no_answer(self.url, path, self.timeout_s, exc)) from exc
        if len(body) > MAX_BYTES:
            raise SourceError(f"Prometheus {path} answered more than {MAX_BYTES // 2**20} MiB "
                              f"for {params.get('query', '')!r}: read a shorter window")
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise SourceError(f"Prometheus {path} answered what is not JSON: {exc}") from exc
        query = params.get("query", "")
        if not isinstance(doc, dict):
            raise SourceError(f"Prometheus {path} answered a JSON {type(doc).__name__} for "
                              f"{query!r}, not an object with status and data")
        if doc.get("status") != "success":
            raise SourceError(f"Prometheus {path} refused {query!r}: "
                              f"{doc.get('errorType')}: {doc.get('error')}")
        if not isinstance(doc.get("data"), dict):
            raise SourceError(f"Prometheus {path} answered status success for {query!r} "
                              f"without a data object (data is {_kind(doc.get('data'))})")
        return doc["data"]

    def counters(self, engine: str, model: str, start_s: float, end_s: float) -> list[Series]:
        """Every sample in ``(start_s, end_s]`` of the engine's token counters for ``model``
        (label ``model_name``), one :class:`Series` per metric and label set.

        Raises SourceError (no answer, an error, a value that is not a finite number: the series
        and time are named) and ValueError (an unknown engine)."""
        if engine not in COUNTERS:
            raise ValueError(f"unknown engine {engine!r}: one of {', '.join(COUNTERS)}")
        kind_of = {n: k for k, names in COUNTERS[engine].items() for n in names}
        model_q = json.dumps(model, ensure_ascii=False)[1:-1]  # PromQL strings escape as JSON
        return self.read(kind_of, f'model_name="{model_q}"', start_s, end_s)

    def serving(self, engine: str, model: str, start_s: float, end_s: float) -> list[Series]:
        """Every sample in ``(start_s, end_s]`` of the engine's serving metrics for ``model``
        (:data:`SERVING`; :attr:`Series.kind` is the stat, a histogram's series carry their
        ``le`` label). Raises SourceError, ValueError (an unknown engine)."""
        model_q = json.dumps(model, ensure_ascii=False)[1:-1]
        return self.read(serving_names(engine), f'model_name="{model_q}"', start_s, end_s,
                         strict=False)

    def energy(self, selector: str, start_s: float, end_s: float) -> list[Series]:
        """Every sample in ``(start_s, end_s]`` of DCGM's energy counter
        (:data:`ENERGY_COUNTER`, mJ since the driver loaded) on the GPUs the PromQL label
        matchers ``selector`` pick (``Hostname="node-1"``: operator configuration, checked by
        :func:`check_selector`). Raises SourceError, ValueError (a selector that is not label
        matchers)."""
        return self.read({ENERGY_COUNTER: "prompt"}, check_selector(selector), start_s, end_s)

    def power(self, selector: str, start_s: float, end_s: float) -> list[Series]:
        """Every sample in ``(start_s, end_s]`` of DCGM's power gauge (:data:`POWER_GAUGE`, W)
        on the GPUs ``selector`` picks (:meth:`energy`'s matchers). Raises SourceError,
        ValueError."""
        return self.read({POWER_GAUGE: "prompt"}, check_selector(selector), start_s, end_s)

    def read(self, kind_of: dict[str, str], matchers: str, start_s: float,
             end_s: float, strict: bool = True) -> list[Series]:
        """The samples in ``(start_s, end_s]`` of the metrics named in ``kind_of`` (name ->
        the :attr:`Series.kind` given to it) under the label ``matchers``, read in chunks of
        :data:`CHUNK_S`, one :class:`Series` per metric and label set. ``strict``: a sample
        that is not a finite number >= 0 refuses the answer (a counter, a power gauge);
        otherwise it is dropped (a serving stat: that bin's stat is unknown, the demand is
        still measured). Raises SourceError, also for a series with two values at one time
        (no counter has that; a reset between them cannot be told from garbage)."""
        names = "|".join(kind_of)  # metric names hold letters, digits, '_' and ':' only
        merged: dict[tuple, list] = {}
        t = start_s
        while t < end_s:
            stop = min(t + CHUNK_S, end_s)
            span = max(int(math.ceil(stop - t)), 1)
            query = f'{{__name__=~"{names}",{matchers}}}[{span}s]'
            data = self._get("/api/v1/query", {"query": query, "time": f"{stop:.3f}"})
            for key, pts in _matrix(data, query, strict):
                merged.setdefault(key, []).extend(pts)
            t = stop
        out = []
        for (name, labels), pts in sorted(merged.items()):
            pts = sorted(set(pts))
            twice = [a for a, b in zip(pts, pts[1:], strict=False) if a[0] == b[0]]
            if twice:
                raise SourceError(f"series {name}{dict(labels)} has two values at time "
                                  f"{twice[0][0]:.3f} ({twice[0][1]:g} and another): an answer "
                                  "headroom cannot bin")
            out.append(Series(name, kind_of.get(name, "prompt"), labels,
                              np.array([p[0] for p in pts]), np.array([p[1] for p in pts])))
        return out


#: DCGM exporter's cumulative energy counter (mJ since the driver loaded; DCGM field 156).
ENERGY_COUNTER = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
#: DCGM exporter's power draw gauge (W; in dcgm-exporter's default counters), integrated over
#: time where a GPU has no energy counter.
POWER_GAUGE = "DCGM_FI_DEV_POWER_USAGE"
_MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*'


def check_selector(selector: str) -> str:
    """``selector`` when it is PromQL label matchers (``a="x", b=~"y.*"``), without braces;
    else ValueError naming it."""
    import re

    if not re.fullmatch(f"{_MATCHER}(,{_MATCHER})*", selector or ""):
        raise ValueError(f"{selector!r} is not PromQL label matchers such as "
                         'Hostname="gpu-node-1" or pod=~"vllm-llama-.*"')
    return selector.strip()


def _kind(value) -> str:
    """How a JSON value reads in a refusal: ``null``, ``a list``, ``a string`` ..."""
    return "null" if value is None else f"a {type(value).__name__}"


def check_url(url: str, what: str) -> str:
    """``url`` when it is an http(s) URL with a host and a valid port, without credentials
    (they would be echoed in every refusal and log line: give the source a reverse proxy or a
    network policy instead); else SourceError naming it and ``what`` it should be."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises ValueError for a port out of range
    except ValueError as exc:
        raise SourceError(f"{url!r} is not a valid URL of {what}: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SourceError(f"{url!r} is not an http(s) URL of {what}")
    if parts.username is not None or parts.password is not None:
        raise SourceError(f"the URL of {what} holds credentials (user:password@): headroom "
                          "refuses them, since every refusal would echo them; reach the server "
                          "through a proxy on a trusted network instead")
    del port
    return url


def _no_answer(url: str, path: str, timeout_s: float, exc: BaseException,
               who: str = "Prometheus") -> str:
    """The refusal of a request that got no HTTP answer, naming why: refused, unknown host,
    or the timeout (``who``: what answers there, Prometheus or an engine)."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, ConnectionRefusedError):
        return f"{who} at {url} refused the connection ({path}): is it running on that port?"
    if isinstance(reason, OSError) and reason.__class__.__name__ == "gaierror":
        return f"{who} at {url}: the host name does not resolve ({reason})"
    if isinstance(reason, TimeoutError) or "timed out" in str(reason):
        return f"{who} at {url} did not answer {path} within {timeout_s:g} s"
    return f"{who} at {url} could not be reached ({path}): {reason}"


def _matrix(data: dict, query: str, strict: bool = True):
    """``(key, [(ts_s, value), ...])`` per series of a ``matrix`` answer to ``query``, where
    ``key`` is ``(metric name, sorted labels)``.

    Raises SourceError naming the query and series: not a matrix, a result or series of the
    wrong shape, a sample time that is not a finite number, a value that is not a finite
    counter value (>= 0)."""
    if data.get("resultType") != "matrix":
        raise SourceError(f"Prometheus answered {data.get('resultType')!r} for {query!r}, "
                          "not a matrix of samples")
    result = data.get("result")
    if not isinstance(result, list):
        raise SourceError(f"Prometheus answered a matrix for {query!r} whose result is "
                          f"{_kind(result)}, not a list of series")
    for i, item in enumerate(result):
        metric = item.get("metric") if isinstance(item, dict) else None
        values = item.get("values") if isinstance(item, dict) else None
        if not isinstance(metric, dict) or not isinstance(values, list):
            raise SourceError(f"series {i} of the answer to {query!r} is not an object with a "
                              f"metric object and a values list (metric is {_kind(metric)}, "
                              f"values {_kind(values)})")
        labels = {str(k): str(v) for k, v in metric.items()}
        name = labels.pop("__name__", "")
        pts = []
        for pair in values:
            if not isinstance(pair, list) or len(pair) != 2:
                raise SourceError(f"series {name}{labels}: sample {pair!r} is not a "
                                  "[time, value] pair")
            stamp, raw = pair
            try:
                ts_s = float(stamp)
            except (TypeError, ValueError):
                ts_s = math.nan
            if not math.isfinite(ts_s):
                raise SourceError(f"series {name}{labels}: sample time {stamp!r} is not a "
                                  "UNIX time in seconds")
            try:
                value = float(raw)
            except (TypeError, ValueError):
                value = math.nan
            if not math.isfinite(value) or value < 0:
                if not strict:
                    continue  # a gauge's bad sample: dropped (the stat's bin is unknown)
                raise SourceError(f"series {name}{labels} at {ts_s:.3f}: "
                                  f"{raw!r} is not a finite number >= 0")
            pts.append((ts_s, value))
        yield (name, tuple(sorted(labels.items()))), pts
