"""ML.ENERGY leaderboard v3 -> ``bench_runs`` (columns as :mod:`analytics.ingest.formats.bench`
states for every benchmark format).

ML.ENERGY leaderboard v3 (``tasks/<task>.json``, ``models/<org>__<model>__<task>.json`` or
``all_task_configurations_flat.csv``): ``avg_power_watts`` (all GPUs), ``energy_per_token_joules``,
``output_throughput_tokens_per_sec``, ``median_itl_ms`` (and ``p90_itl_ms`` / ``p99_itl_ms``),
``max_num_seqs``, ``avg_output_len``, total/activated parameters. A per-model file writes model
id, task, parameter counts and precision once beside its configurations and the parallel
degrees under ``parallelization``: they are read as if written on each configuration, so the
three layouts give the same row for the same configuration. Diffusion rows (no tokens) are
skipped; a file of diffusion runs only raises
:class:`~analytics.ingest.rawfile.SkippedByDesign` (reported ``skipped``, not ``rejected``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from analytics.hardware import catalog as hardware
from analytics.ingest.formats._common import (
    FormatError,
    Parsed,
    SkippedByDesign,
    header_fields,
    open_text,
)
from analytics.ingest.formats.bench import TABLE, cell_number, csv_rows, finish_frame, whole

_V3_NUM = ("num_gpus", "tensor_parallel", "avg_power_watts", "energy_per_token_joules",
           "output_throughput_tokens_per_sec", "median_itl_ms", "max_num_seqs",
           "avg_output_len", "total_params_billions", "activated_params_billions",
           "p90_itl_ms", "p99_itl_ms")

#: Fields a per-model file (``models/<org>__<model>__<task>.json``) writes once, beside its
#: ``configurations``, that a tasks file and the flat CSV write on every configuration.
_V3_MODEL_FIELDS = ("model_id", "task", "total_params_billions", "activated_params_billions",
                    "weight_precision")


def _v3_config(doc: dict, conf: dict) -> dict:
    """One JSON configuration laid out as a tasks file writes it: the file's per-model fields
    (:data:`_V3_MODEL_FIELDS`) and the nested ``parallelization`` object (``tensor_parallel``,
    ``data_parallel``, ``expert_parallel``) brought to its top level; the configuration's own
    fields win over both."""
    par = conf.get("parallelization")
    common = {k: doc[k] for k in _V3_MODEL_FIELDS if k in doc}
    return {**common, **(par if isinstance(par, dict) else {}), **conf}


def _v3_record(c: dict, display: str, line: int, column: str = "") -> dict | None:
    """One LLM configuration (flat: tasks file, flat CSV, or :func:`_v3_config`) as a
    ``bench_runs`` record; None for a diffusion configuration (images / videos, no tokens).
    Raises FormatError naming ``line`` and the field (after the ``column`` prefix)."""
    if c.get("energy_per_token_joules") in (None, "") and c.get(
            "output_throughput_tokens_per_sec") in (None, "") and c.get("avg_output_len") in (
            None, ""):
        return None  # diffusion configuration (images / videos, no tokens)
    # an LLM configuration without its energy per token is refused below (required), not
    # skipped as if it were a diffusion one
    v = {k: cell_number(c.get(k), display, line, column + k, required=k in (
        "num_gpus", "tensor_parallel", "energy_per_token_joules",
        "output_throughput_tokens_per_sec")) for k in _V3_NUM}
    if not c.get("model_id"):
        raise FormatError(display, line, column + "model_id", "empty value")
    hw = hardware.normalise(str(c.get("gpu_model")))
    return {
        "source": "ML.ENERGY v3", "task": c.get("task") or None, "hardware": hw,
        "gpu_mem_gb": hardware.memory_gb(hw),
        "n_gpus": whole(v["num_gpus"], display, line, column + "num_gpus"),
        "tp": whole(v["tensor_parallel"], display, line, column + "tensor_parallel"), "pp": 1,
        "precision": hardware.precision(c.get("weight_precision")), "framework": "vLLM",
        "model": c.get("model_id"), "params_b": v["total_params_billions"],
        "active_params_b": v["activated_params_billions"], "out_len": v["avg_output_len"],
        "concurrency": v["max_num_seqs"], "throughput_tok_s": v["output_throughput_tokens_per_sec"],
        "itl_ms": v["median_itl_ms"], "itl_p90_ms": v["p90_itl_ms"],
        "itl_p99_ms": v["p99_itl_ms"], "power_w": v["avg_power_watts"],
        "energy_per_token_j": v["energy_per_token_joules"], "failed": False,
    }


def _element_line(text: str, key: str, index: int) -> int:
    """1-based line on which element ``index`` of the JSON array ``key`` starts (the first
    ``"key": [`` of ``text``), or 1 when the text is not laid out so."""
    m = re.search(rf'"{re.escape(key)}"\s*:\s*\[', text)
    if not m:
        return 1
    dec, pos = json.JSONDecoder(), m.end()
    for i in range(index + 1):
        pos = len(text) - len(text[pos:].lstrip(" \t\r\n,"))
        if i == index:
            return text.count("\n", 0, pos) + 1
        try:
            _, pos = dec.raw_decode(text, pos)
        except ValueError:
            return 1
    return 1


def _v3_json_records(path: Path, display: str) -> tuple[list[dict], int]:
    """Records and number of diffusion configurations of a v3 JSON file: a tasks file
    (``tasks/<task>.json``, flat configurations) or a per-model file (``models/<org>__<model>__
    <task>.json``: model id, task, parameter counts and precision once per file, parallel
    degrees under each configuration's ``parallelization``). Raises FormatError naming the
    line a bad configuration starts on and ``configurations[i].<field>``."""
    with open_text(path) as fh:
        text = fh.read()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(display, exc.lineno, exc.colno, f"invalid JSON: {exc.msg}") from exc
    confs = doc.get("configurations") if isinstance(doc, dict) else None
    if not isinstance(confs, list):
        raise FormatError(display, 1, "configurations", "no 'configurations' list")
    recs, skipped = [], 0
    for i, conf in enumerate(confs):
        where = f"configurations[{i}]."
        try:
            if not isinstance(conf, dict):
                raise FormatError(display, 1, where.rstrip("."), "a configuration must be a "
                                                                 "JSON object")
            rec = _v3_record(_v3_config(doc, conf), display, 1, where)
        except FormatError as exc:
            raise FormatError(display, _element_line(text, "configurations", i), exc.column,
                              exc.reason) from None
        if rec is None:
            skipped += 1
        else:
            recs.append(rec)
    return recs, skipped


def _v3_csv_records(path: Path, display: str) -> tuple[list[dict], int]:
    """Records and number of diffusion rows of ``all_task_configurations_flat.csv``."""
    recs, skipped = [], 0
    rows = csv_rows(path, display)
    _, header = next(rows)
    for line, cells in rows:
        if len(cells) != len(header):
            raise FormatError(display, line, min(len(cells), len(header)) + 1,
                              f"row has {len(cells)} fields, header has {len(header)}")
        rec = _v3_record(dict(zip(header, cells, strict=True)), display, line)
        if rec is None:
            skipped += 1
        else:
            recs.append(rec)
    return recs, skipped


class MLEnergyV3:
    NAME = "mlenergy_v3"
    SOURCE_COLUMNS = {"hardware": "gpu_model", "model": "model_id", "task": "task",
                      "n_gpus": "num_gpus", "tp": "tensor_parallel",
                      "precision": "weight_precision", "params_b": "total_params_billions",
                      "active_params_b": "activated_params_billions",
                      "out_len": "avg_output_len", "concurrency": "max_num_seqs",
                      "throughput_tok_s": "output_throughput_tokens_per_sec",
                      "itl_ms": "median_itl_ms", "itl_p90_ms": "p90_itl_ms",
                      "itl_p99_ms": "p99_itl_ms", "power_w": "avg_power_watts",
                      "energy_per_token_j": "energy_per_token_joules"}
    TABLE = TABLE

    @staticmethod
    def detect(name: str, head: str) -> bool:
        if head.lstrip().startswith("{"):
            return '"configurations"' in head and ('"gpu_model"' in head or '"task"' in head)
        fields = set(header_fields(head))
        return {"gpu_model", "energy_per_token_joules", "tensor_parallel", "model_id"} <= fields

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        """A tasks file, a per-model file or the flat CSV -> one ``bench_runs`` row per LLM
        configuration (the three layouts give equal rows for the same configuration, so the
        store's :func:`~analytics.store.bench_runs` counts it once). Raises
        :class:`SkippedByDesign` when every configuration is a diffusion run, FormatError for
        a bad configuration."""
        path = Path(path)
        with open_text(path) as fh:
            first = fh.read(1)
        recs, skipped = (_v3_json_records if first == "{" else _v3_csv_records)(path, display)
        if not recs and skipped:
            raise SkippedByDesign(display, 1, "energy_per_token_joules",
                                  f"all {skipped} configurations are diffusion runs (images / "
                                  "videos, no tokens): nothing for bench_runs")
        warns = ["ML.ENERGY v3 reports no input lengths or TTFT; power_w is all GPUs together"]
        if skipped:
            warns.append(f"{skipped} diffusion configurations skipped (no tokens)")
        return Parsed(TABLE, MLEnergyV3.NAME, finish_frame(recs, display), display, 0.0, tuple(warns))
