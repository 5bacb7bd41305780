"""Generator of the malformed-input corpus of issue 16 (``test_malformed_corpus.py``).

Each format has one small VALID input (:data:`BASES`: a few real rows of the staged file, or
the shape the existing tests use); each kind breaks it one way (:func:`cases`): truncated,
ragged, wrong types, empty / negative / NaN / Inf / overflowing / fractional values, bad and
implausible dates, out-of-order and duplicate rows, binary garbage, NUL bytes, CRLF mixes,
byte-order marks, truncated gzip, empty / header-only files, unterminated quotes, duplicate
headers, wrong delimiters, JSON syntax errors, wrong JSON types, missing keys, deep nesting,
huge single lines. Files are a few hundred bytes (the huge ones 2-3 MB) and written on demand.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field

from conftest import SHARED_DATA

CASES = SHARED_DATA.parent / "cases"


@dataclass(frozen=True)
class Base:
    """A valid input of format ``fmt`` (file ``name``). Tabular inputs name the columns the
    kinds break: ``num`` a non-negative measure, ``count`` a whole count, ``ts`` a time and
    ``far`` a value of it beyond 2099 (column names as in the header, or 0-based field
    numbers where the file has no header); ``hdr`` lines come before the data."""

    fmt: str
    name: str
    text: str
    sep: str = ","
    hdr: int = 1
    num: str | int | None = None
    count: str | int | None = None
    ts: str | int | None = None
    far: str | None = None
    opts: dict = field(default_factory=dict)
    unit: str = ""


def _head(rel: str, n: int) -> str:
    path = SHARED_DATA / rel
    opener = gzip.open if rel.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as fh:
        return "".join(next(fh) for _ in range(n)).replace("\r\n", "\n")


_SMI = ("timestamp, index, power.draw [W], utilization.gpu [%], memory.used [MiB]\n"
        + "".join(f"2024/05/10 14:03:2{s}.123, 0, {250 + s}.5 W, 9{s} %, 100 MiB\n"
                  for s in range(3)))
_EPW_HEAD = ("LOCATION,Sample City,XX,COUNTRY,TMY3,999999,40.00,-100.00,-6.0,500.0\n"
             "DESIGN CONDITIONS,0\nTYPICAL/EXTREME PERIODS,0\nGROUND TEMPERATURES,0\n"
             "HOLIDAYS/DAYLIGHT SAVINGS,No,0,0,0\nCOMMENTS 1,corpus\nCOMMENTS 2,corpus\n"
             "DATA PERIODS,1,1,Data,Sunday, 1/ 1,12/31\n")
_EPW_ROW = ("1997,3,1,{h},60,A7A7A7A7*0?9?9?9?9?9?9?9A7A7A7A7A7A7*0E8*0*0,{t},-2.0,75,101300,0,0,"
            "280,0,0,0,0,0,0,0,270,3.1,2,2,16.0,77777,9,999999999,80,0.08,0,88,0.16,0.0,1.0\n")
_DCGM = "".join(f'DCGM_FI_DEV_POWER_USAGE{{gpu="{g}",Hostname="n1"}} {250.5 + s} '
                f'{1715349801000 + s * 1000}\n' for s in range(3) for g in range(2))
_METEO = {"latitude": 51.49, "longitude": -0.16, "utc_offset_seconds": 0,
          "timezone": "Europe/London",
          "hourly": {"time": ["2023-01-01T00:00", "2023-01-01T01:00", "2023-01-01T02:00"],
                     "temperature_2m": [5.1, 5.0, 4.8], "relative_humidity_2m": [80, 81, 82]}}
#: One SGLang ``bench_serving`` result (keys as SGLang writes them; see test_cases_sglang)
_SGLANG = {"backend": "sglang", "dataset_name": "random", "max_concurrency": 64,
           "random_input_len": 1024, "random_output_len": 512, "duration": 120.0,
           "completed": 300, "total_input_tokens": 307200, "total_output_tokens": 153600,
           "request_throughput": 2.5, "input_throughput": 2560.0, "output_throughput": 1280.0,
           "mean_e2e_latency_ms": 25000.0, "median_e2e_latency_ms": 24000.0,
           "mean_ttft_ms": 300.0, "median_ttft_ms": 250.0, "mean_tpot_ms": 24.0,
           "median_tpot_ms": 23.5, "mean_itl_ms": 24.0, "median_itl_ms": 22.0,
           "p99_itl_ms": 50.0, "concurrency": 62.2}


def _jsonl(rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def bases() -> list[Base]:
    """The valid input of every format (reads a few rows of the staged data)."""
    v3 = json.loads((SHARED_DATA / "ml_energy/leaderboard_v3/tasks/gpqa.json").read_text())
    epw = _EPW_HEAD + "".join(_EPW_ROW.format(h=h, t=1.5 + h) for h in (1, 2, 3))
    return [
        Base("burstgpt", "BurstGPT_1.csv", _head("burstgpt/BurstGPT_1_head400.csv", 4),
             num="Request tokens", count="Response tokens", ts="Timestamp", far="9e12"),
        Base("burstgpt_minute", "burstgpt1_week1_per_minute_tps.csv",
             _head("burstgpt/derived/burstgpt1_week1_per_minute_tps.csv", 4), num="tps", ts="t",
             far="99999999"),
        Base("burstgpt_daily", "burstgpt1_daily_requests_tokens.csv",
             _head("burstgpt/derived/burstgpt1_daily_requests_tokens.csv", 4), num="tok",
             count="req", ts="d", far="99999"),
        Base("azure_llm", "AzureLLMInferenceTrace_code.csv",
             _head("azure_llm/AzureLLMInferenceTrace_code.csv", 4), num="ContextTokens",
             count="GeneratedTokens", ts="TIMESTAMP", far="3000-01-01 00:00:00"),
        Base("mooncake", "conversation_trace.jsonl", _jsonl(
            {"timestamp": t, "input_length": 600 + t, "output_length": 20, "hash_ids": [1, 2]}
            for t in (0, 250, 900)), hdr=0),
        Base("alibaba_lora", "lora_request_trace.csv",
             _head("alibaba_gpu_traces/v2026_genai/lora_request_trace.csv", 4),
             num="exec_time_seconds", ts="gmt_create", far="3000-01-01 00:00:00"),
        Base("mit_supercloud_slurm", "slurm-log-queueing-clean.csv",
             _head("mit_supercloud/slurm-log-queueing-clean.csv", 4), num="time_end",
             ts="time_start", far="99999999999"),
        Base("slurm_sacct", "sacct.txt", "JobID|User|Submit|Start|End|State|ExitCode|AllocTRES\n"
             + "".join(f"{j}|u|2024-05-10T08:{j}0:00|2024-05-10T09:{j}0:00|2024-05-10T1{j}:00:00"
                       f"|COMPLETED|0:0|gres/gpu={2 ** j}\n" for j in (1, 2, 3)),
             sep="|", count="AllocTRES", ts="Start", far="3000-01-01T00:00:00"),
        Base("alibaba_openb", "openb_pod_list_default.csv",
             _head("alibaba_gpu_traces/v2023_openb/openb_pod_list_default.csv", 4),
             num="gpu_milli", count="num_gpu", ts="creation_time", far="9e12"),
        Base("sustaindc_carbon", "CISO_NG_&_avgCI.csv",
             _head("sustaindc_dcrl/CarbonIntensity/CISO_NG_&_avgCI.csv", 4), num="avg_CI",
             ts="timestamp", far="3000-01-01 00:00:00+00:00"),
        Base("greendcc_carbon", "GB_2023_hourly.csv",
             _head("green_dcc/carbon_intensity/GB_2023_hourly.csv.gz", 4),
             num="Carbon Intensity gCO₂eq/kWh (LCA)", ts="Datetime (UTC)",
             far="3000-01-01 00:00:00"),
        Base("greendcc_prices", "FR_electricity_prices_2023.csv",
             _head("green_dcc/electricity_prices/FR_electricity_prices_2023.csv.gz", 4),
             num="Price (USD/MWh)", ts="Datetime (UTC)", far="3000-01-01 00:00:00+00:00"),
        Base("epw_weather", "USA_XX_Sample.epw", epw, hdr=8, num=6, ts=3),
        Base("openmeteo_weather", "GB_2023.json", json.dumps(_METEO, indent=1), hdr=0),
        Base("nvidia_smi", "smi.csv", _SMI, num="power.draw [W]", ts="timestamp",
             far="3000/01/01 00:00:00.000", unit=" W"),
        Base("dcgm_prometheus", "dcgm.prom", _DCGM, hdr=0),
        Base("acmetrace_cdf", "acme_power_util_cdf.csv", _head("acmetrace/acme_power_util_cdf.csv",
                                                               4), num="cdf_percent"),
        Base("mlenergy_v2", "llm_text_generation_runs.csv",
             _head("ml_energy/leaderboard_v2/llm_text_generation_runs.csv", 4),
             num="Energy/req (J)", count="TP"),
        Base("mlenergy_v3", "gpqa.json", json.dumps(dict(v3, configurations=v3["configurations"][
            :2]), indent=2), hdr=0),
        Base("argonne_bench", "Fig_16_a__power_results.csv", _head(
            "llm_inference_bench_argonne/Fig_16_a__power_results.csv", 5).replace("\n\n", "\n"),
             num="Latency", count="Num of Hardware"),
        Base("vllm_bench", "vllm_result.json",
             (CASES / "19-vllm-bench-request-rate-no-concurrency.json").read_text(), hdr=0),
        Base("sglang_bench", "sglang_runs.jsonl", _jsonl(
            dict(_SGLANG, request_rate=r) for r in (2.0, 4.0, 8.0)), hdr=0,
             opts={"hardware": "H100"}),
        Base("canonical", "canon.csv", "ts,prompt_tokens,completion_tokens\n" + "".join(
            f"2024-01-01 00:00:0{s},1{s},{s + 2}\n" for s in range(3)), num="prompt_tokens",
             count="completion_tokens", ts="ts", far="3000-01-01 00:00:00"),
    ]


def _col(b: Base, col: str | int) -> int:
    if isinstance(col, int):
        return col
    return [h.strip() for h in b.text.split("\n")[b.hdr - 1].split(b.sep)].index(col)


def _set(b: Base, col: str | int, value: str, row: int = 1) -> str:
    """``b.text`` with data row ``row`` (0-based) of column ``col`` set to ``value``."""
    lines = b.text.split("\n")
    cells = lines[b.hdr + row].split(b.sep)
    k = _col(b, col)
    lead = cells[k][: len(cells[k]) - len(cells[k].lstrip())]
    cells[k] = lead + value + (b.unit if col == b.num else "")
    lines[b.hdr + row] = b.sep.join(cells)
    return "\n".join(lines)


HUGE = "9" * 2_000_000 + "x"  # a 2 MB cell (the probe used 100 MB)


def tabular(b: Base) -> dict[str, str | bytes]:
    """Kinds for a CSV-like file (header, one row per line)."""
    lines = b.text.split("\n")
    hdr, rows = lines[:b.hdr], [x for x in lines[b.hdr:] if x]

    def join(*rs):
        return "\n".join([*hdr, *rs]) + "\n"

    out: dict[str, str | bytes] = {
        "header_only": join(),
        # the file cut two characters into the last row's second field
        "truncated_last_row": join(*rows[:-1], rows[-1][: rows[-1].index(b.sep) + 2]).rstrip(),
        "extra_field": join(rows[0], rows[1] + b.sep + "9", rows[2]),
        "missing_field": join(rows[0], b.sep.join(rows[1].split(b.sep)[:-1]), rows[2]),
        "duplicate_row": join(rows[0], rows[1], rows[1], rows[2]),
        "binary_garbage": join(rows[0], "\x00\x89PNG\x1a\x0b\x7f", rows[1], rows[2]),
        "nul_in_row": join(rows[0], rows[1][:3] + "\x00" + rows[1][3:], rows[2]),
        "unterminated_quote": join(rows[0], '"' + rows[1], rows[2]),
        "trailing_garbage_line": b.text + "this is not a row\n",
    }
    if b.num is not None:
        for kind, value in (("not_a_number", "abc"), ("empty_cell", ""), ("negative", "-5"),
                            ("nan", "nan"), ("inf", "inf"), ("overflow", "1e400"),
                            ("huge_cell", HUGE)):
            out[kind] = _set(b, b.num, value)
    if b.count is not None:
        out["fractional_count"] = _set(b, b.count, "gres/gpu=1.5" if b.sep == "|" else "1.5")
    if b.ts is not None:
        out["bad_date"] = _set(b, b.ts, "2023-13-45 25:61:00")
        out["empty_time"] = _set(b, b.ts, "")
        out["out_of_order"] = join(rows[0], rows[2], rows[1])
    if b.far is not None:
        out["ts_year_3000"] = _set(b, b.ts, b.far)
    if b.hdr and b.fmt != "epw_weather":
        h = hdr[-1].split(b.sep)
        out["duplicate_header"] = "\n".join([*hdr[:-1], b.sep.join([h[0], h[0], *h[2:]]),
                                             *rows]) + "\n"
        out["wrong_delimiter"] = b.text.replace(b.sep, ";")
        if b.num is not None:
            k = _col(b, b.num)
            out["missing_column"] = "\n".join(b.sep.join(
                x for j, x in enumerate(r.split(b.sep)) if j != k) for r in [*hdr, *rows]) + "\n"
    return out


def json_lines(b: Base) -> dict[str, str | bytes]:
    """Kinds for a JSON Lines file (one object per line)."""
    rows = [json.loads(x) for x in b.text.splitlines()]
    num = "input_length" if b.fmt == "mooncake" else "total_output_tokens"
    cnt = "output_length" if b.fmt == "mooncake" else "completed"

    def with_(**kw):
        return _jsonl([rows[0], dict(rows[1], **kw), rows[2]])

    out = {
        "json_syntax": _jsonl([rows[0], json.dumps(rows[1])[:-5], rows[2]]),
        "wrong_type": with_(**{num: "abc"}), "null_value": with_(**{num: None}),
        "negative": with_(**{num: -5}), "nan": with_(**{num: math.nan}),
        "inf": with_(**{num: math.inf}), "fractional_count": with_(**{cnt: 1.5}),
        "missing_key": _jsonl([rows[0], {k: v for k, v in rows[1].items() if k != num}, rows[2]]),
        "array_not_object": _jsonl([rows[0], [1, 2, 3], rows[2]]),
        "deep_nesting": _jsonl([rows[0], "[" * 5000 + "]" * 5000, rows[2]]),
        "blank_lines": _jsonl([rows[0], "", rows[1], "   ", rows[2]]),
        "huge_line": with_(pad="x" * 3_000_000),
        "trailing_garbage_line": b.text + "not json\n",
    }
    if b.fmt == "mooncake":
        out["huge_value"] = with_(input_length=10 ** 30)
        out["ts_year_3000"] = with_(timestamp=10 ** 15)
    return out


def json_doc(b: Base) -> dict[str, str | bytes]:
    """Kinds for a file holding one JSON document."""
    doc = json.loads(b.text)
    text = b.text.rstrip()

    def dump(x):
        return json.dumps(x, indent=1)

    out: dict[str, str | bytes] = {
        "json_syntax": b.text.replace(",", ",,", 3), "trailing_garbage": b.text + "\n{}",
        "top_level_array": dump([doc]),
        "deep_nesting": text[:-1] + ', "x": ' + "[" * 5000 + "]" * 5000 + "}",
        "huge_line": text[:-1] + ', "pad": "' + "x" * 3_000_000 + '"}'}
    if b.fmt == "openmeteo_weather":
        h = doc["hourly"]

        def hourly(**kw):
            return dump(dict(doc, hourly=dict(h, **kw)))

        out.update({
            "nan": hourly(temperature_2m=[5.1, math.nan, 4.8]),
            "wrong_type": hourly(temperature_2m=[5.1, "warm", 4.8]),
            "null_value": hourly(temperature_2m=[5.1, None, 4.8]),
            "out_of_range": hourly(temperature_2m=[5.1, 99.0, 4.8]),
            "rh_over_100": hourly(relative_humidity_2m=[80, 181, 82]),
            "length_mismatch": hourly(temperature_2m=[5.1, 5.0]),
            "bad_date": hourly(time=["2023-01-01T00:00", "2023-13-45T99:00", "2023-01-01T02:00"]),
            "ts_year_3000": hourly(time=[f"3000-01-01T0{i}:00" for i in range(3)]),
            "duplicate_time": hourly(time=["2023-01-01T00:00"] * 2 + ["2023-01-01T02:00"]),
            "missing_key": dump({k: v for k, v in doc.items() if k != "utc_offset_seconds"}),
            "wrong_type_offset": dump(dict(doc, utc_offset_seconds="+01:00")),
            "hourly_not_object": dump(dict(doc, hourly=[1, 2])),
            "missing_time": dump(dict(doc, hourly={k: v for k, v in h.items() if k != "time"}))})
    elif b.fmt == "mlenergy_v3":
        c = doc["configurations"]

        def conf(**kw):
            return dump(dict(doc, configurations=[c[0], dict(c[1], **kw)]))

        out.update({
            "negative": conf(avg_power_watts=-5.0), "nan": conf(avg_power_watts=math.nan),
            "inf": conf(avg_power_watts=math.inf), "wrong_type": conf(avg_power_watts="hot"),
            "null_value": conf(energy_per_token_joules=None), "fractional_count": conf(num_gpus=1.5),
            "negative_count": conf(tensor_parallel=-2),
            "missing_key": dump(dict(doc, configurations=[c[0], {
                k: v for k, v in c[1].items() if k != "energy_per_token_joules"}])),
            "list_not_list": dump(dict(doc, configurations={"a": 1})),
            "item_not_object": dump(dict(doc, configurations=[c[0], 7]))})
    elif b.fmt == "vllm_bench":
        out.update({
            "negative": dump(dict(doc, output_throughput=-5.0)),
            "nan": dump(dict(doc, median_ttft_ms=math.nan)),
            "inf": dump(dict(doc, output_throughput=math.inf)),
            "wrong_type": dump(dict(doc, output_throughput="fast")),
            "null_value": dump(dict(doc, output_throughput=None))})
    return out


def prometheus(b: Base) -> dict[str, str | bytes]:
    """Kinds for a Prometheus text exposition (DCGM exporter)."""
    lines = b.text.split("\n")
    value = lines[2].split(" ")[1]

    def sub(old, new, i=2):
        out = list(lines)
        out[i] = out[i].replace(old, new, 1)
        return "\n".join(out)

    return {"nan": sub(f" {value} ", " NaN "), "inf": sub(f" {value} ", " +Inf "),
            "negative": sub(f" {value} ", " -5 "), "not_a_number": sub(f" {value} ", " abc "),
            "ts_year_3000": sub(" 1715349802000", " 32503680000000"),
            "bad_labels": sub('{gpu="0"', '{gpu="0'), "missing_value": sub(f" {value} ", " "),
            "duplicate_row": "\n".join([*lines[:3], lines[2], *lines[3:]]),
            "not_a_sample": b.text + "this is not a sample\n",
            "huge_line": sub(f" {value} ", f" {HUGE} ")}


def cases() -> list[tuple[Base, str, str | bytes]]:
    """Every (base, kind, file content) of the corpus; bytes are written as they are."""
    out = []
    for b in bases():
        common: dict[str, str | bytes] = {
            "empty_file": "", "truncated_gzip": gzip.compress(b.text.encode())[:-12],
            "utf8_bom": "\ufeff" + b.text, "crlf_mix": b.text.replace("\n", "\r\n", 2)}
        if b.fmt == "dcgm_prometheus":
            kinds = prometheus(b)
        elif b.fmt in ("mooncake", "sglang_bench"):
            kinds = json_lines(b)
        elif b.hdr == 0:
            kinds = json_doc(b)
            common["cut_short"] = b.text[: int(len(b.text) * 0.6)]
        else:
            kinds = tabular(b)
        out += [(b, kind, data) for kind, data in {**common, **kinds}.items()]
    return out


def write(tmp_path, b: Base, kind: str, data: str | bytes):
    """The case as a file in ``tmp_path`` (``.gz`` added for gzip content)."""
    path = tmp_path / f"{kind}__{b.name}"
    if isinstance(data, bytes):
        path = path.with_name(path.name + ".gz")
        path.write_bytes(data)
    else:
        path.write_bytes(data.encode("utf-8"))
    return path
