"""DCGM exporter scrapes (Prometheus text exposition) -> ``telemetry``.

Lines ``NAME{labels} value [timestamp_ms]``, ``#`` comments. Fields: ``DCGM_FI_DEV_POWER_USAGE``
(W), ``DCGM_FI_PROF_SM_ACTIVE`` (ratio 0-1), ``DCGM_FI_DEV_GPU_UTIL`` (%),
``DCGM_FI_DEV_FB_USED`` (MiB), ``DCGM_FI_DEV_GPU_TEMP`` (degC), ``DCGM_FI_DEV_SM_CLOCK`` /
``DCGM_FI_DEV_MEM_CLOCK`` (MHz), ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (cumulative mJ since
the driver loaded, stored as J); other metrics are skipped. A GPU is (host, ``gpu`` label,
``UUID`` label): host = the ``Hostname`` label, else ``--site``, else the file stem, so scrapes
of several nodes in one file (same ``gpu`` indices) stay apart; ``UUID`` (else ``pci_bus_id``)
goes to ``gpu_uuid``. Timestamps are epoch milliseconds (UTC; ``--tz`` does not apply), or
epoch seconds with a fraction in OpenMetrics text (``promtool tsdb dump-openmetrics``,
``# EOF``; a value below 1e11 is seconds);
samples without a timestamp take ``--t0`` (an assumption the report states). A file of several
scrapes appended without timestamps (``curl .../metrics >> file``; a series seen again starts
the next scrape, at the ``# HELP`` lines before it) is refused at the second scrape unless
``--scrape-interval-s`` gives their spacing: scrape k is then at ``t0 + k * interval``.

Rules (issue 14): ``NaN`` / ``±Inf`` values (what the exporter writes for a blank field) are
NULL with a warning naming line and metric, never 0; an energy counter below the GPU's previous
sample is a counter reset, warned about with its line (analyses take reset-aware deltas); a
metric given twice for one (time, host, GPU) keeps the later value, with a warning.
"""

from __future__ import annotations

import dataclasses
import math
import re

import polars as pl

from analytics.ingest.formats._common import (
    FormatError,
    Note,
    Parsed,
    file_stem,
    open_text,
    t0_assumption,
)
from analytics.ingest.formats.telemetry import sample_notes

_PROM = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)"
                   r"(?:\s+(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?))?\s*$")
#: a sample timestamp below this is epoch *seconds* (OpenMetrics, ``promtool tsdb
#: dump-openmetrics``: seconds with a fraction), at or above it epoch milliseconds (Prometheus
#: text format 0.0.4); 1e11 ms is 1973-03-03, 1e11 s is beyond year 5000
_SECONDS_BELOW = 1e11
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
_DCGM = {
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0), "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util_pct", 1.0), "DCGM_FI_DEV_FB_USED": ("mem_used_mib", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0), "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", 1e-3),
}
_METRIC_OF = {col: name for name, (col, _) in _DCGM.items()}


class Dcgm:
    NAME = "dcgm_prometheus"
    TABLE = "telemetry"
    TIME_COLUMN = "timestamp_ms"  # the field a time-range refusal names
    SOURCE_COLUMNS = _METRIC_OF

    @staticmethod
    def detect(name: str, head: str) -> bool:
        return "DCGM_FI_" in head and bool(re.search(r"^DCGM_FI_\w+(\{|\s)", head, re.M))

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        t0_ms = int(opts.t0.timestamp() * 1000)
        default_host = opts.site or file_stem(display)
        samples: dict[tuple, dict] = {}
        blanks: dict[str, list[int]] = {}
        twice: list[int] = []
        n, stamped, labels_seen, units = 0, None, set(), set()
        scrape, in_scrape, comment_from, scrape_lines = 0, set(), None, [1]
        with open_text(path) as fh:
            for lineno, line in enumerate(fh, start=1):
                text = line.strip()
                if text.startswith("#"):
                    comment_from = comment_from or lineno
                    continue
                got = _sample(lineno, text, display)
                if got is None:
                    if text:
                        comment_from = None
                    continue
                name, lab, val, stamp = got
                ts = None if stamp is None else stamp[1]
                if stamp is not None:
                    units.add(stamp[0])
                if stamped is None:
                    stamped = ts is not None
                elif stamped != (ts is not None):  # e.g. 'NAME{..}  1715...': value missing
                    raise FormatError(display, lineno, "timestamp_ms", (
                        "sample has no timestamp while the first sample has one (a missing "
                        "value?)" if stamped else
                        "sample has a timestamp while the first sample has none"))
                host = lab.get("Hostname") or default_host
                labels_seen.update(k for k in ("Hostname", "UUID", "pci_bus_id") if k in lab)
                ident = lab.get("UUID") or (f"pci:{lab['pci_bus_id']}"
                                            if lab.get("pci_bus_id") else None)
                series = (name, host, int(lab["gpu"]), ident)
                if not stamped and series in in_scrape:  # appended scrapes: a new one starts
                    start = comment_from or lineno
                    if opts.scrape_interval_s is None:
                        raise FormatError(display, start, 1, (
                            "a second scrape starts here (the file appends scrapes without "
                            "timestamps: each repeats # HELP / # TYPE), so its time is unknown: "
                            "give the seconds between the scrapes (CLI --scrape-interval-s; "
                            "Data page: Parse options), or scrape with timestamps"))
                    scrape, in_scrape = scrape + 1, set()
                    scrape_lines.append(start)
                in_scrape.add(series)
                comment_from = None
                step_ms = round(scrape * (opts.scrape_interval_s or 0) * 1000)
                key = (ts if ts is not None else t0_ms + step_ms, host, int(lab["gpu"]), ident)
                col, factor = _DCGM[name]
                row = samples.setdefault(key, {"__line": lineno})
                if col in row:
                    twice.append(lineno)
                n += 1
                if not math.isfinite(val):
                    blanks.setdefault(name, []).append(lineno)
                    row.setdefault(col, None)
                    continue
                row[col] = val * factor
                if col == "energy_j":
                    row["__line"] = lineno  # a counter reset is reported on the counter's line
        if not n:
            raise FormatError(display, 1, 1, "no DCGM_FI_* samples")
        parsed = _parsed(samples, blanks, twice, n, display)
        sources = {col: metric for col, metric in _METRIC_OF.items()
                   if col in parsed.frame.columns}
        sources["gpu_id"] = "gpu label"
        if "UUID" in labels_seen or "pci_bus_id" in labels_seen:
            sources["gpu_uuid"] = "UUID label" if "UUID" in labels_seen else "pci_bus_id label"
        assumed = []
        if "Hostname" in labels_seen:
            sources["host"] = "Hostname label"
        elif not opts.site:
            assumed.append(f"host assumed: no Hostname label; the GPUs are on host "
                           f"{default_host!r} (the file name; give --site to name it)")
        if stamped:
            sources["ts"] = " and ".join(
                {"ms": "sample timestamp (epoch ms)",
                 "s": "sample timestamp (epoch s, OpenMetrics)"}[u] for u in sorted(units))
        else:
            assumed.append(t0_assumption(opts, "no sample has a timestamp; the first scrape"))
            if scrape:
                assumed.append(
                    f"interval assumed: {scrape + 1} appended scrapes (starting at lines "
                    f"{', '.join(map(str, scrape_lines))}) placed {opts.scrape_interval_s:g} s "
                    "apart, in file order (--scrape-interval-s)")
        return dataclasses.replace(parsed, sources=sources, assumptions=tuple(assumed))


def _sample(lineno: int, text: str, display: str):
    """``(metric, labels, value, ts_ms or None)`` of a DCGM sample line; None for comments,
    blank lines and metrics not read. Raises FormatError for a malformed line."""
    if not text or text.startswith("#"):
        return None
    m = _PROM.match(text)
    if not m:
        raise FormatError(display, lineno, 1,
                          "not a Prometheus sample line 'NAME{labels} value [ts]'")
    name, _, labels, value, ts = m.groups()
    if name not in _DCGM:
        return None
    lab = dict(_LABEL.findall(labels or ""))
    if "gpu" not in lab:
        raise FormatError(display, lineno, "gpu", "sample has no gpu label")
    try:
        val = float(value)
    except ValueError as exc:
        raise FormatError(display, lineno, len(name) + len(labels or "") + 3,
                          f"{value!r} is not a number") from exc
    try:
        int(lab["gpu"])
    except ValueError as exc:
        raise FormatError(display, lineno, "gpu", f"gpu label {lab['gpu']!r} is "
                          "not an integer") from exc
    if not ts:
        return name, lab, val, None
    stamp = float(ts)
    if "." in ts or "e" in ts.lower() or abs(stamp) < _SECONDS_BELOW:
        return name, lab, val, ("s", round(stamp * 1000))
    return name, lab, val, ("ms", int(ts))


def _parsed(samples: dict, blanks: dict, twice: list[int], n: int, display: str) -> Parsed:
    recs = [{"ts_ms": k[0], "host": k[1], "gpu_id": k[2], "gpu_uuid": k[3], **v}
            for k, v in samples.items()]
    frame = pl.DataFrame(recs, infer_schema_length=None).with_columns(
        pl.from_epoch(pl.col("ts_ms"), "ms").cast(pl.Datetime("us")).alias("ts")
    ).drop("ts_ms").sort("ts", "host", "gpu_id")
    notes = [Note(f"{name} value NaN/Inf read as empty (NULL, not 0)", column=name, lines=lines)
             for name, lines in blanks.items()]
    if twice:
        notes.append(Note("a metric given twice for the same (time, host, GPU): the later value "
                          "kept; scrapes of several nodes need a Hostname label", lines=twice))
    notes += sample_notes(frame, lambda col: _METRIC_OF.get(col, col))
    hosts = frame["host"].n_unique()
    gpus = frame.select("host", "gpu_id", "gpu_uuid").unique().height
    return Parsed("telemetry", Dcgm.NAME, frame, display, 1e-3,
                  (f"{n} DCGM samples pivoted to {frame.height} (time, host, GPU) rows; "
                   f"{gpus} GPU(s) on {hosts} host(s)", *notes))
