"""GPU telemetry files -> ``telemetry``; AcmeTrace distributions -> ``reference_cdf``.

* ``nvidia-smi --query-gpu=timestamp,index,power.draw,... --format=csv[,noheader][,nounits]``:
  comma-and-space separated; the header names the query fields, with ``[W]``, ``[MiB]``,
  ``[%]``, ``[MHz]`` unit suffixes unless ``nounits``; values may carry the same units and
  ``[N/A]`` / ``[Not Supported]`` mean no value. ``timestamp`` is ``YYYY/MM/DD HH:MM:SS.fff`` in
  the host's local time without a zone: with ``--tz`` it is converted to UTC (each GPU's samples
  in file order; the repeated DST hour's second pass, after the clock steps back or repeats, is
  standard time; a skipped-hour time moves forward by the gap); without it, read as UTC and rows
  where a GPU's clock steps back or repeats are named. Needs
  ``timestamp`` and ``index``; maps ``power.draw``, ``utilization.gpu``, ``memory.used``,
  ``temperature.gpu``, ``clocks.sm``, ``clocks.mem``, ``clocks_event_reasons.active`` /
  ``clocks_throttle_reasons.active`` when present. ``host`` = ``--site`` or the file stem.
* DCGM exporter, Prometheus text exposition: lines ``NAME{labels} value [timestamp_ms]``, ``#``
  comments. Fields: ``DCGM_FI_DEV_POWER_USAGE`` (W), ``DCGM_FI_PROF_SM_ACTIVE`` (ratio 0-1),
  ``DCGM_FI_DEV_GPU_UTIL`` (%), ``DCGM_FI_DEV_FB_USED`` (MiB), ``DCGM_FI_DEV_GPU_TEMP`` (degC),
  ``DCGM_FI_DEV_SM_CLOCK`` / ``DCGM_FI_DEV_MEM_CLOCK`` (MHz),
  ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (mJ, stored as J). Labels ``gpu`` and ``Hostname``
  give the GPU and host. Timestamps are epoch milliseconds (UTC; ``--tz`` does not apply);
  samples without a timestamp take ``--t0`` (one scrape).
* AcmeTrace ``acme_power_util_cdf.csv`` (``source_pkl, cluster, metric, cdf_percent, value``):
  per-cluster CDFs of per-GPU power (W) and utilisation (%), used as reference overlays.
"""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl

from analytics.ingest.formats._common import (
    ROW,
    FormatError,
    Parsed,
    file_stem,
    header_fields,
    open_text,
    read_csv_checked,
)
from analytics.ingest.localtime import localize_sequence, note_clock_steps

_SMI_FIELDS = {
    "power.draw": "power_w", "power.draw.instant": "power_w", "power.draw.average": "power_w",
    "utilization.gpu": "gpu_util_pct", "memory.used": "mem_used_mib",
    "temperature.gpu": "temp_c", "clocks.sm": "sm_clock_mhz", "clocks.current.sm": "sm_clock_mhz",
    "clocks.mem": "mem_clock_mhz", "clocks.current.memory": "mem_clock_mhz",
    "clocks_event_reasons.active": "throttle_reasons",
    "clocks_throttle_reasons.active": "throttle_reasons",
}
_NA = {"[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", ""}


def _smi_header(head: str) -> list[str]:
    return [re.sub(r"\s*\[.*?\]$", "", f.strip()) for f in head.splitlines()[0].split(",")]


class NvidiaSmi:
    NAME = "nvidia_smi"
    TABLE = "telemetry"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        fields = _smi_header(head) if head.strip() else []
        return "timestamp" in fields and "index" in fields and any(f in _SMI_FIELDS
                                                                   for f in fields)

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        rows = list(_smi_rows(path, display))  # every row's shape is checked before its values
        recs = [{ROW: line - 2, **_smi_record(line, cells, display)} for line, cells in rows]
        if not recs:
            raise FormatError(display, 2, 1, "no samples after the header")
        host = opts.site or file_stem(display)
        frame = pl.DataFrame(recs, infer_schema_length=None).with_columns(
            pl.lit(host).alias("host"))
        frame, notes = _smi_clock(frame, opts.tz)
        clock = (f"local times in {opts.tz} converted to UTC" if opts.tz else
                 "timestamps read as UTC (nvidia-smi prints the host's local time: give --tz)")
        return Parsed("telemetry", NvidiaSmi.NAME, frame.drop(ROW), display, 1e-3,
                      (f"host {host!r}; nvidia-smi {clock}", *notes))

    LOCAL_TIMES = True  # nvidia-smi prints the host's local clock without an offset


def _smi_clock(frame: pl.DataFrame, tz: str | None) -> tuple[pl.DataFrame, list]:
    """nvidia-smi local timestamps -> UTC in ``tz`` (each GPU's samples a sequence in file order,
    one per time: :func:`~analytics.ingest.localtime.localize_sequence`), or, without a zone, a
    note on rows where a GPU's clock steps back or repeats (a likely repeated DST hour)."""
    if tz is not None:
        return localize_sequence(frame, "ts", tz, by=["gpu_id"], unique=True,
                                 column="timestamp")
    note = note_clock_steps(frame, "ts", by=["gpu_id"], unique=True, column="timestamp")
    return frame, [note] if note else []


def _smi_rows(path, display: str):
    """(line number, {query field: cell}) of each non-blank nvidia-smi data row."""
    with open_text(path) as fh:
        header = _smi_header(fh.readline())
        for lineno, line in enumerate(fh, start=2):
            if not line.strip():
                continue
            cells = [c.strip() for c in line.rstrip("\r\n").split(",")]
            if len(cells) != len(header):
                raise FormatError(display, lineno, min(len(cells), len(header)) + 1,
                                  f"row has {len(cells)} fields, header has {len(header)}")
            yield lineno, dict(zip(header, cells, strict=True))


def _smi_record(line: int, rec: dict[str, str], display: str) -> dict:
    """One nvidia-smi row as canonical telemetry values (units stripped, ``[N/A]`` empty)."""
    try:
        ts = datetime.strptime(rec["timestamp"], "%Y/%m/%d %H:%M:%S.%f")
    except ValueError as exc:
        raise FormatError(display, line, "timestamp",
                          f"{rec['timestamp']!r} is not YYYY/MM/DD HH:MM:SS.fff") from exc
    try:
        gpu = int(rec["index"])
    except ValueError as exc:
        raise FormatError(display, line, "index", f"{rec['index']!r} is not an integer") from exc
    out = {"ts": ts, "gpu_id": gpu}
    for field, col in _SMI_FIELDS.items():
        raw = rec.get(field)
        if raw is None or raw in _NA or out.get(col) is not None:
            continue
        value = re.sub(r"\s*(W|MiB|%|MHz)$", "", raw)
        try:
            out[col] = int(value, 16) if col == "throttle_reasons" else float(value)
        except ValueError as exc:
            raise FormatError(display, line, field, f"{raw!r} is not a number") from exc
    return out


_PROM = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
_DCGM = {
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0), "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util_pct", 1.0), "DCGM_FI_DEV_FB_USED": ("mem_used_mib", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0), "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", 1e-3),
}


class Dcgm:
    NAME = "dcgm_prometheus"
    TABLE = "telemetry"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        return "DCGM_FI_" in head and bool(re.search(r"^DCGM_FI_\w+(\{|\s)", head, re.M))

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        t0_ms = int(opts.t0.timestamp() * 1000)
        samples: dict[tuple, dict] = {}
        n = 0
        with open_text(path) as fh:
            for lineno, line in enumerate(fh, start=1):
                text = line.strip()
                if not text or text.startswith("#"):
                    continue
                m = _PROM.match(text)
                if not m:
                    raise FormatError(display, lineno, 1,
                                      "not a Prometheus sample line 'NAME{labels} value [ts]'")
                name, _, labels, value, ts = m.groups()
                if name not in _DCGM:
                    continue
                lab = dict(_LABEL.findall(labels or ""))
                if "gpu" not in lab:
                    raise FormatError(display, lineno, "gpu", "sample has no gpu label")
                try:
                    val = float(value)
                except ValueError as exc:
                    raise FormatError(display, lineno, len(name) + len(labels or "") + 3,
                                      f"{value!r} is not a number") from exc
                try:
                    gpu = int(lab["gpu"])
                except ValueError as exc:
                    raise FormatError(display, lineno, "gpu", f"gpu label {lab['gpu']!r} is "
                                      "not an integer") from exc
                key = (int(ts) if ts else t0_ms, lab.get("Hostname") or opts.site
                       or file_stem(display), gpu)
                col, factor = _DCGM[name]
                samples.setdefault(key, {})[col] = val * factor
                n += 1
        if not n:
            raise FormatError(display, 1, 1, "no DCGM_FI_* samples")
        recs = [{"ts_ms": k[0], "host": k[1], "gpu_id": k[2], **v} for k, v in samples.items()]
        frame = pl.DataFrame(recs).with_columns(
            pl.from_epoch(pl.col("ts_ms"), "ms").cast(pl.Datetime("us")).alias("ts")
        ).drop("ts_ms").sort("ts", "host", "gpu_id")
        return Parsed("telemetry", Dcgm.NAME, frame, display, 1e-3,
                      (f"{n} DCGM samples pivoted to {frame.height} (time, host, GPU) rows",))


class AcmeCdf:
    NAME = "acmetrace_cdf"
    TABLE = "reference_cdf"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        return header_fields(head) == ["source_pkl", "cluster", "metric", "cdf_percent", "value"]

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        frame = read_csv_checked(path, display, {"source_pkl": pl.String, "cluster": pl.String,
                                                 "metric": pl.String, "cdf_percent": pl.Float64,
                                                 "value": pl.Float64})
        bad = (frame["cdf_percent"] < 0) | (frame["cdf_percent"] > 100)
        if bad.any():
            raise FormatError(display, 2 + int(frame[ROW][int(bad.arg_true()[0])]),
                              "cdf_percent", "outside 0..100")
        out = frame.select(pl.lit("AcmeTrace").alias("source"), "cluster", "metric",
                           "cdf_percent", "value")
        return Parsed("reference_cdf", AcmeCdf.NAME, out, display, 0.0,
                      ("AcmeTrace (NSDI'24) per-cluster CDFs, for reference overlays",))
