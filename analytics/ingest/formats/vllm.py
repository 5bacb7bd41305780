"""``vllm bench serve --save-result`` JSON (the format users produce themselves): needs the
hardware in the result's metadata (``vllm bench serve ... --metadata hardware=H100 tp=1
precision=bf16``); throughput is ``output_throughput``, TTFT/ITL the medians, ``request_rate``
the offered rate (req/s, ``inf`` -> empty), ``concurrency`` is ``max_concurrency`` when set, else
measured by Little's law (request throughput x mean e2e latency) with ``concurrency_measured``
true; lengths are ``total_*_tokens / completed``.

Columns mean what :mod:`analytics.ingest.formats.bench` says.
"""

from __future__ import annotations

import json
from pathlib import Path

from analytics.hardware import catalog as hardware
from analytics.ingest.formats._common import FormatError, Parsed, open_text
from analytics.ingest.formats.bench import TABLE, cell_number, finish_frame, params_from_name


class VllmBench:
    NAME = "vllm_bench"
    TABLE = TABLE

    @staticmethod
    def detect(name: str, head: str) -> bool:
        s = head.lstrip()
        return s.startswith("{") and '"output_throughput"' in head and (
            '"median_ttft_ms"' in head or '"mean_ttft_ms"' in head)

    @staticmethod
    def parse(path, display, opts) -> Parsed:
        with open_text(Path(path)) as fh:
            try:
                doc = json.load(fh)
            except json.JSONDecodeError as exc:
                raise FormatError(display, exc.lineno, exc.colno, f"invalid JSON: {exc.msg}") \
                    from exc
        if not isinstance(doc, dict):
            raise FormatError(display, 1, 1, "a vllm bench result is one JSON object")
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        look = {**doc, **meta}
        hw_raw = look.get("hardware") or look.get("gpu")
        if not hw_raw:
            raise FormatError(display, 1, "hardware",
                              "the result does not say which GPU ran it: rerun with "
                              "`vllm bench serve ... --save-result --metadata hardware=H100 tp=1 "
                              "precision=bf16` (or add \"hardware\" to the JSON)")
        completed = cell_number(doc.get("completed"), display, 1, "completed", positive=True)
        tp = int(cell_number(look.get("tp", look.get("tensor_parallel_size", 1)), display, 1, "tp",
                      positive=True))
        n_gpus = int(cell_number(look.get("n_gpus", tp), display, 1, "n_gpus", positive=True))
        rate, conc, measured, conc_note = _vllm_load(doc, look, display)
        tput = cell_number(doc.get("output_throughput"), display, 1, "output_throughput", positive=True)
        power = cell_number(look.get("power_w"), display, 1, "power_w", required=False)
        hw = hardware.normalise(str(hw_raw))
        failed = cell_number(doc.get("failed"), display, 1, "failed", required=False) or 0
        rec = {
            "source": "vllm bench serve", "task": "vllm-serve", "hardware": hw,
            "gpu_mem_gb": hardware.memory_gb(hw), "n_gpus": n_gpus, "tp": tp,
            "pp": int(cell_number(look.get("pp", 1), display, 1, "pp", positive=True)),
            "precision": hardware.precision(look.get("precision") or look.get("dtype")),
            "framework": "vLLM", "model": doc.get("model_id") or look.get("model"),
            "params_b": cell_number(look.get("params_b"), display, 1, "params_b", required=False)
            or params_from_name(str(doc.get("model_id") or "")),
            "active_params_b": cell_number(look.get("active_params_b"), display, 1, "active_params_b",
                                    required=False),
            "in_len": cell_number(doc.get("total_input_tokens"), display, 1, "total_input_tokens")
            / completed,
            "out_len": cell_number(doc.get("total_output_tokens"), display, 1, "total_output_tokens")
            / completed,
            "concurrency": conc, "concurrency_measured": measured, "request_rate": rate,
            "throughput_tok_s": tput,
            "ttft_ms": cell_number(doc.get("median_ttft_ms", doc.get("mean_ttft_ms")), display, 1,
                            "median_ttft_ms"),
            "itl_ms": cell_number(doc.get("median_itl_ms", doc.get("median_tpot_ms")), display, 1,
                           "median_itl_ms", required=False),
            "latency_s": None if doc.get("median_e2el_ms") is None else
            cell_number(doc["median_e2el_ms"], display, 1, "median_e2el_ms") / 1000.0,
            "power_w": power, "energy_per_token_j": power / tput if power else None,
            "failed": bool(failed),
        }
        if rec["active_params_b"] is None:
            rec["active_params_b"] = rec["params_b"]
        return Parsed(TABLE, VllmBench.NAME, finish_frame([rec], display), display, 0.0,
                      ("one configuration per result file; power_w only if given in metadata",
                       *conc_note))


def _vllm_load(doc: dict, look: dict, display: str
               ) -> tuple[float | None, float | None, bool | None, tuple[str, ...]]:
    """Offered load of a ``vllm bench serve`` result: request rate and concurrency, kept apart.

    ``request_rate`` (req/s; ``inf`` = all requests at once -> None) is a rate, never a
    concurrency. ``max_concurrency`` when set is the configured concurrency; otherwise the mean
    number of requests in flight is measured by Little's law (Little 1961, L = lambda W):
    ``completed / duration`` (req/s, else ``request_throughput``) x ``mean_e2el_ms / 1000`` (s),
    e.g. 3.937 req/s x 9.150 s = 36.0. Values may be strings (``--metadata`` key=value pairs).

    Returns
    -------
    (request_rate, concurrency, concurrency_measured, notes): concurrency None when neither is
    known; notes are warnings for the Parsed record. Raises FormatError naming a bad field.
    """
    raw_rate = look.get("request_rate")
    rate = None
    if not (raw_rate is None or str(raw_rate).strip().lower() in ("inf", "infinity", "null")):
        rate = cell_number(raw_rate, display, 1, "request_rate", positive=True, required=False)
    raw_conc = look.get("max_concurrency")
    if raw_conc is not None and str(raw_conc).strip().lower() not in ("", "null", "none"):
        return rate, cell_number(raw_conc, display, 1, "max_concurrency", positive=True), False, ()
    latency_ms = cell_number(doc.get("mean_e2el_ms"), display, 1, "mean_e2el_ms", required=False)
    duration = cell_number(doc.get("duration"), display, 1, "duration", required=False)
    completed = cell_number(doc.get("completed"), display, 1, "completed", required=False)
    throughput = (completed / duration if completed and duration else
                  cell_number(doc.get("request_throughput"), display, 1, "request_throughput",
                       required=False))
    offered = f"request rate {rate:g} req/s" if rate else "unbounded request rate"
    if not latency_ms or not throughput:
        return rate, None, None, (f"no max_concurrency ({offered}) and no mean_e2el_ms / "
                                  "throughput to measure it: concurrency empty",)
    conc = throughput * latency_ms / 1000.0
    return rate, conc, True, (
        f"no max_concurrency ({offered}): concurrency {conc:.1f} MEASURED by Little's law "
        f"({throughput:.3f} req/s x {latency_ms / 1000.0:.3f} s mean e2e latency), "
        "concurrency_measured = true",)
