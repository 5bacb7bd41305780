"""Mooncake request traces (Kimi / Moonshot AI, FAST'25), JSON Lines.

Source: kvcache-ai/Mooncake ``*_trace.jsonl``, Apache-2.0. Each line is
``{"timestamp": ms since the trace start, "input_length", "output_length", "hash_ids": [...]}``.
``ts = t0 + timestamp`` (relative, see :class:`analytics.config.ParseOptions`). ``hash_ids`` are
KV-cache block hashes (prefix sharing); headroom does not store them. No model, failure, session
or latency fields exist in the trace.
"""

from __future__ import annotations

import json
import math

import polars as pl

from analytics.ingest.formats._common import (
    ROW,
    FormatError,
    Parsed,
    check_monotone,
    check_nonnegative,
    open_text,
)

_KEYS = ("timestamp", "input_length", "output_length")


class Mooncake:
    """Mooncake JSON Lines request trace -> ``requests``."""

    NAME = "mooncake"
    TABLE = "requests"

    @staticmethod
    def detect(name: str, head: str) -> bool:
        first = head.lstrip().splitlines()[0] if head.strip() else ""
        if not first.startswith("{"):
            return False
        try:
            rec = json.loads(first)
        except ValueError:
            return all(f'"{k}"' in first for k in _KEYS)
        return isinstance(rec, dict) and all(k in rec for k in _KEYS)

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        ts, inp, out_len, rows = [], [], [], []
        try:
            with open_text(path) as fh:
                for lineno, line in enumerate(fh, start=1):
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except ValueError as exc:
                        raise FormatError(display, lineno, exc.colno, f"invalid JSON: {exc.msg}") from exc
                    if not isinstance(rec, dict):
                        raise FormatError(display, lineno, 1, "line is not a JSON object")
                    for key in _KEYS:
                        val = rec.get(key)
                        if key not in rec:
                            raise FormatError(display, lineno, key, f"missing key {key!r}")
                        if isinstance(val, bool) or not isinstance(val, int | float):
                            raise FormatError(display, lineno, key, f"{val!r} is not a number")
                        if not math.isfinite(val) or abs(val) > 10 * 365 * 86400 * 1000:
                            raise FormatError(display, lineno, key, f"{val!r} is out of range")
                        if key != "timestamp" and val != int(val):
                            raise FormatError(display, lineno, key, f"{val!r} is not a whole "
                                                                    "number of tokens")
                    ts.append(rec["timestamp"])
                    inp.append(int(rec["input_length"]))
                    out_len.append(int(rec["output_length"]))
                    rows.append(lineno - 1)
        except (OSError, EOFError) as exc:
            raise FormatError(display, len(ts) + 1, 1, f"gzip stream is truncated or corrupt ({exc})") \
                from exc
        except UnicodeDecodeError as exc:
            raise FormatError(display, len(ts) + 1, 1, "bytes are not UTF-8 text") from exc
        if not ts:
            raise FormatError(display, 1, 1, "no records")
        frame = pl.DataFrame(
            {ROW: rows, "timestamp": ts, "input_length": inp, "output_length": out_len},
            schema={ROW: pl.Int64, "timestamp": pl.Float64, "input_length": pl.Int64,
                    "output_length": pl.Int64},
        )
        # header_line=0: JSONL has no header, so data row i sits on line i + 1
        check_nonnegative(frame, list(_KEYS), display, header_line=0)
        t0_us = int(opts.t0.timestamp() * 1_000_000)
        frame = frame.with_columns(
            pl.from_epoch((pl.col("timestamp") * 1000).round().cast(pl.Int64) + t0_us, "us").alias("ts")
        )
        check_monotone(frame, display, opts.max_backstep_s, "timestamp", header_line=0)
        out = frame.select(
            "ts",
            pl.lit(None, pl.String).alias("model"),
            pl.col("input_length").alias("prompt_tokens"),
            pl.col("output_length").alias("completion_tokens"),
            pl.lit(False).alias("failed"),
            pl.lit(None, pl.String).alias("session_id"),
            pl.lit(None, pl.Float64).alias("latency_s"),
        )
        warnings = (
            f"timestamps are ms from the trace start, placed at t0 = {opts.t0.isoformat()}",
            "hash_ids (KV-cache block hashes) are not stored",
        )
        return Parsed("requests", Mooncake.NAME, out, display, 1e-3, warnings)
