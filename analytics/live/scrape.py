"""A live source without a Prometheus (issue 29 item 1): headroom scrapes an engine's own
``/metrics`` (vLLM, SGLang: the Prometheus text format, parsed by ``prometheus_client``) and
keeps the token counters' and serving metrics' samples itself, so the follower bins them exactly as it bins
Prometheus' stored samples (:class:`analytics.live.source.PrometheusSource`'s interface).

Without a TSDB there is no back-fill: the samples are the ones headroom took, stamped with its
own clock when the answer arrived. A restart of headroom, or an engine that does not answer,
leaves the bins it spans as gaps (no sample to count from), said per bin. What is kept is
bounded: the samples of the last :data:`KEEP_S` seconds, at most :data:`MAX_SERIES` series.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import numpy as np

from analytics.live.source import (
    COUNTERS,
    MAX_BYTES,
    SERVING,
    Series,
    SourceError,
    _no_answer,
    check_url,
    serving_names,
)

#: Seconds of samples kept (enough for a poll that closes a day of bins at once).
KEEP_S = 86400
#: Series kept at most (label sets of the counters, over every model the engine serves).
MAX_SERIES = 1000


class ScrapeSource:
    """An engine's ``/metrics`` at ``url`` (operator configuration), scraped by :meth:`scrape`.

    Parameters
    ----------
    url : the engine's metrics URL (``http://vllm-host:8000/metrics``)
    timeout_s : seconds one scrape may take
    clock : UNIX seconds now (a test's clock, else ``time.time``)
    model : keep only this ``model_name``'s series (None: every model's); another model's
        series is neither checked nor counted against :data:`MAX_SERIES`
    """

    scrape_interval_s = 15.0

    def __init__(self, url: str, timeout_s: float = 10.0, clock=time.time,
                 model: str | None = None):
        self.url = check_url(url, "an engine's /metrics")
        self.timeout_s, self.clock, self.model = float(timeout_s), clock, model
        self.samples: dict[tuple, list[tuple[float, float]]] = {}
        self.names = {n for kinds in COUNTERS.values() for ns in kinds.values() for n in ns}
        self.counter_names = set(self.names)
        self.names |= {n for engine in SERVING for n in serving_names(engine)}
        self.last_s: float | None = None

    def scrape(self) -> int:
        """Read the engine's counters once; returns the samples taken. Raises SourceError
        (no answer, an answer over :data:`~analytics.live.source.MAX_BYTES`, text that is
        not the exposition format, a counter value that is not a finite number >= 0)."""
        from prometheus_client.parser import text_string_to_metric_families

        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout_s) as resp:  # noqa: S310
                body = resp.read(MAX_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise SourceError(f"{self.url} answered HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise SourceError(_no_answer(self.url, "/metrics", self.timeout_s, exc,
                                         "the engine")) from exc
        if len(body) > MAX_BYTES:
            raise SourceError(f"{self.url} answered more than {MAX_BYTES // 2**20} MiB")
        now = float(self.clock())
        if self.last_s is not None and now == self.last_s:
            return 0  # this instant is read already
        if self.last_s is not None and now < self.last_s:  # the clock stepped back (NTP)
            raise SourceError(f"the clock stepped back to {now:.3f}, before the last scrape at "
                              f"{self.last_s:.3f}: this scrape is dropped (its samples would "
                              "be out of time order)")
        taken = 0
        try:
            families = list(text_string_to_metric_families(body.decode("utf-8", "replace")))
        except ValueError as exc:
            raise SourceError(f"{self.url} answered what is not the Prometheus text format: "
                              f"{exc}") from exc
        for fam in families:
            for s in fam.samples:
                if s.name not in self.names or (
                        self.model is not None and s.labels.get("model_name") != self.model):
                    continue
                value = float(s.value)
                if not np.isfinite(value) or value < 0:
                    if s.name not in self.counter_names:
                        continue  # a serving gauge's bad sample: dropped, the stat unknown
                    raise SourceError(f"series {s.name}{dict(s.labels)} at {now:.3f}: "
                                      f"{s.value!r} is not a finite number >= 0")
                key = (s.name, tuple(sorted(s.labels.items())))
                if key not in self.samples and len(self.samples) >= MAX_SERIES:
                    continue
                self.samples.setdefault(key, []).append((now, value))
                taken += 1
        self.last_s = now
        for pts in self.samples.values():  # bounded: the last KEEP_S seconds
            while pts and pts[0][0] < now - KEEP_S:
                pts.pop(0)
        return taken

    def counters(self, engine: str, model: str, start_s: float, end_s: float) -> list[Series]:
        """The kept samples in ``(start_s, end_s]`` of the engine's token counters for
        ``model`` (:meth:`analytics.live.source.PrometheusSource.counters`' shape)."""
        if engine not in COUNTERS:
            raise ValueError(f"unknown engine {engine!r}: one of {', '.join(COUNTERS)}")
        kind_of = {n: k for k, names in COUNTERS[engine].items() for n in names}
        return self._kept(kind_of, model, start_s, end_s)

    def serving(self, engine: str, model: str, start_s: float, end_s: float) -> list[Series]:
        """The kept samples in ``(start_s, end_s]`` of the engine's serving metrics for
        ``model`` (:meth:`analytics.live.source.PrometheusSource.serving`' shape)."""
        return self._kept(serving_names(engine), model, start_s, end_s)

    def _kept(self, kind_of: dict[str, str], model: str, start_s: float,
              end_s: float) -> list[Series]:
        out = []
        for (name, labels), pts in sorted(self.samples.items()):
            if name not in kind_of or dict(labels).get("model_name") != model:
                continue
            kept = [p for p in pts if start_s < p[0] <= end_s]
            if kept:
                out.append(Series(name, kind_of[name], labels, np.array([p[0] for p in kept]),
                                  np.array([p[1] for p in kept])))
        return out

    def energy(self, selector: str, start_s: float, end_s: float) -> list[Series]:
        """Energy needs DCGM's exporter through a Prometheus: refused (ValueError)."""
        raise ValueError("energy per token reads DCGM's energy counter from a Prometheus: give "
                         "--prometheus, or leave --energy-selector out with --scrape")

    def power(self, selector: str, start_s: float, end_s: float) -> list[Series]:
        """Power needs DCGM's exporter through a Prometheus: refused (ValueError)."""
        return self.energy(selector, start_s, end_s)
