"""Every combination a user can reach ends in an answer or a clear refusal (issue 27 item 4).

One store holds one real dataset of each kind headroom stores: a request trace with tokens
(Azure conv), a GPU-seconds-only trace (Alibaba LoRA), a pre-binned series (the BurstGPT week,
per minute), benchmark runs (ML.ENERGY v3, Argonne power and TTFT), Slurm jobs (case 07: no job has a
start time, so the power simulation refuses it), DCGM telemetry (case 20), carbon
intensity (two SustainDC sites), weather (an EPW file), electricity prices (Green-DCC) and a
reference CDF (AcmeTrace), and the Azure conv trace once more as an attached dataset (its
rows exported to a hive-partitioned Parquet file and read in place, never stored). Then

* every CLI command that takes a dataset runs on each of them, with each target (and a second
  bin for the grid): exit 0 with a strict JSON document, or exit 2 with ``{"error": ...}`` that
  names what is wrong; never exit 1, never a traceback (``headroom capacity
  lora_request_trace --target gpu_seconds`` ended in one: ``GpuSpec.__init__() missing
  'sources'``);
* the commands that take no dataset run on that store;
* every page opens in AppTest with each demand dataset in the sidebar (the pages that pick
  their own inputs from the store once; Coverage on the LoRA trace and on the week is opened by
  ``tests/ui/test_pages.py``): no exception, no error id.

The store is seeded once per module (the envelope cache beside it is shared by the commands
and the pages, so each demand dataset is fitted once per target).
"""

from __future__ import annotations

import math
import shutil

import pytest
from harness import case_file, new_app, seed, strict_loads

from analytics import store
from analytics.cli import main
from analytics.ingest import files as ingest

STAGED = {
    "requests": "azure_llm/AzureLLMInferenceTrace_conv.csv",
    "gpu_seconds": "alibaba_gpu_traces/v2026_genai/lora_request_trace.csv",
    "series": "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv",
    "bench": "ml_energy/leaderboard_v3/all_task_configurations_flat.csv",
    "bench_power": "llm_inference_bench_argonne/Fig_16_a_b__power_results.csv",
    "bench_ttft": "llm_inference_bench_argonne/Fig_21__all_results_TTFT.csv",
    "carbon": "sustaindc_dcrl/CarbonIntensity/CISO_NG_&_avgCI.csv",
    "carbon2": "sustaindc_dcrl/CarbonIntensity/ERCO_NG_&_avgCI.csv",
    "weather": "sustaindc_dcrl/Weather/USA_AZ_Phoenix-Sky.Harbor.epw.gz",
    "prices": "green_dcc/electricity_prices/US-CAL-CISO_electricity_prices_2023.csv.gz",
    "cdf": "acmetrace/acme_power_util_cdf.csv",
}
CASES = {"jobs": "07-sacct-alloctres-typed-gpu.txt", "telemetry": "20-dcgm-two-nodes-same-gpu-index.prom"}
#: the request traces: the stored one and the same rows attached where they live
TRACES = ("requests", "attached")
TARGETS = ("weighted_tokens", "gpu_seconds")
#: the pages that read the sidebar's dataset, opened on each demand kind
DATASET_PAGES = ("demand", "coverage", "capacity", "dispatch", "fleet")
#: the pages that pick their own inputs from the store (files, telemetry, jobs, traces,
#: benchmarks): opened once
OWN_INPUT_PAGES = ("data", "telemetry", "power", "serving", "placement", "leaderboard")


@pytest.fixture(scope="module")
def matrix(tmp_path_factory, model_cache):
    """The seeded store: ``{"db": path, "names": kind -> dataset name, "sites": "A,B"}``."""
    from conftest import share_cache

    folder = tmp_path_factory.mktemp("matrix")
    db = folder / "matrix.duckdb"
    share_cache(db, model_cache)
    seed(db, *STAGED.values())
    con = store.connect(db)
    for name in CASES.values():
        ingest.ingest_files(con, [ingest.FileIn(case_file(name), name)])
    source_of = {d["source"]: d["name"] for d in store.ledger_records(con)}
    part = folder / "attached" / "part=0"
    part.mkdir(parents=True)
    store.copy_dataset(con, source_of[STAGED["requests"].rsplit("/", 1)[-1]],
                       part / "rows.parquet", "parquet")
    from analytics.ingest.attach import attach

    attach(con, "conv_attached", str(folder / "attached" / "part=*" / "*.parquet"))
    con.close()
    names = {kind: source_of[rel.rsplit("/", 1)[-1]] for kind, rel in {**STAGED, **CASES}.items()}
    names["attached"] = "conv_attached"
    sites = "CISO,ERCO"  # the two carbon files' sites
    return {"db": db, "names": names, "sites": sites, "folder": folder}


def _run(capsys, db, *args) -> tuple[int, object]:
    capsys.readouterr()
    try:
        code = main(["--db", str(db), *args])
    except SystemExit as exc:  # argparse: a usage error
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, (args, err[-2000:])
    assert code in (0, 2), (args, code, err[-2000:])
    doc = strict_loads(out)
    if code == 2:
        assert isinstance(doc, dict) and doc["error"], (args, doc)
    return code, doc


def _commands(kind: str, name: str, names: dict, sites: str, out) -> dict[tuple, tuple[str, ...]]:
    """Every command that takes a dataset, with each target it can be asked for, as
    ``(command, target or None) -> argv``. Cold start takes the dataset as its target (the
    source fitted is the one-hour Azure trace: a fit per kind would cost 2-4 s each); the
    serving what-if runs one policy (the serving tests run them all)."""
    conv = names["requests"]
    rows: dict[tuple, tuple[str, ...]] = {
            ("summary", None): ("summary", name), ("grid", None): ("grid", name),
            ("grid", "1h"): ("grid", name, "--bin", "1h"),
            ("telemetry", None): ("telemetry", "summary", name),
            ("export", None): ("export", name, "--out", str(out / f"{kind}.csv")),
            ("coldstart", None): ("coldstart", conv, name, "--bin", "10s"),
            ("serve-energy", None): ("serve-energy", name, "--models", "2", "--policy",
                                     "festina"),
            ("powersim", "jobs"): ("powersim", "--jobs", name, "--inference", "synthetic",
                                   "--days", "1", "--warmup-days", "1"),
            ("powersim", "inference"): ("powersim", "--inference", name, "--days", "1",
                                        "--warmup-days", "1"),
            # the live road on every kind as its history: refused before any fit (a window
            # past the 31-day bound, a dataset that is no demand), never a traceback
            ("live", None): ("live", "--prometheus", "http://127.0.0.1:9", "--model", "m",
                             "--history", name, "--to", "2030-01-01T00:00:00"),
            ("live", "follow"): ("live", "--prometheus", "http://127.0.0.1:9", "--model", "m",
                                 "--history", name, "--follow", "--to", "2000-01-01T00:00:00",
                                 "--run", f"matrix-{kind}")}
    # a fleet plan of every kind: a request trace with tokens plans; a pre-binned series only
    # with the share of its tokens that are output tokens; the other kinds are refused
    at = ("--bin", "10s") if kind in TRACES else ()
    plan = ("plan", name, "--model", "Qwen/Qwen3-14B", "--task", "lm-arena-chat",
            "--itl-p99-ms", "100", *at)
    rows |= {("plan", None): plan, ("plan", "share"): (*plan, "--output-share", "0.35")}
    for target in TARGETS:
        # the one-hour Azure trace at 10 s (its 5-minute default leaves 2 calibration bins: a
        # refusal, exit 2); the others at their default bin
        t = ("--target", target, *(("--bin", "10s") if kind in TRACES else ()))
        rows |= {("grid", target): ("grid", name, *t),
                 ("envelope", target): ("envelope", name, *t),
                 ("capacity", target): ("capacity", name, *t),
                 ("dispatch", target): ("dispatch", name, "--sites", sites, *t)}
    if kind in TRACES:  # the what-if answers on this very trace in tests/serving/
        del rows["serve-energy", None]  # test_serving.py (the 16-model CLI run): 5.9 s here
    return rows


@pytest.mark.parametrize("kind", [*STAGED, *CASES, "attached"])
def test_every_command_on_every_kind_answers_or_refuses(matrix, kind, capsys):
    name = matrix["names"][kind]
    ran = {label: _run(capsys, matrix["db"], *args)
           for label, args in _commands(kind, name, matrix["names"], matrix["sites"],
                                        matrix["folder"]).items()}
    code = {label: got[0] for label, got in ran.items()}
    assert code["summary", None] == code["export", None] == 0  # every dataset has both
    demand = kind in ("requests", "attached", "gpu_seconds", "series")
    # a demand dataset has a grid; only the LoRA trace has GPU-seconds; only DCGM is telemetry
    assert (code["grid", None] == 0) == demand
    for command in ("grid", "envelope", "capacity"):
        assert (code[command, "gpu_seconds"] == 0) == (kind == "gpu_seconds"), command
    assert (code["telemetry", None] == 0) == (kind == "telemetry")
    assert code["live", None] == 2 and ran["live", None][1]["error"]
    assert code["live", "follow"] == 2 and ran["live", "follow"][1]["error"]
    if kind != "jobs":  # case 07's jobs never started: a refusal too, naming why
        assert code["powersim", "jobs"] == 2
    assert (code["plan", None] == 0) == (kind in TRACES), ran["plan", None]
    assert (code["plan", "share"] == 0) == (kind == "series"), ran["plan", "share"]
    if kind in ("requests", "attached", "series"):
        for command in ("grid", "envelope", "capacity", "dispatch"):
            assert code[command, "weighted_tokens"] == 0, command
        # the site the LP leaves empty shows 0, not HiGHS's -0.0 (a fresh-user check)
        shares = [v for site in ran["dispatch", "weighted_tokens"][1]["sites"].values()
                  for k, v in site.items() if k.endswith("_share")]
        assert all(math.copysign(1.0, v) == 1.0 for v in shares), shares


def test_the_commands_without_a_dataset_answer_on_the_matrix_store(matrix, capsys):
    db = matrix["db"]
    code, listed = _run(capsys, db, "datasets")
    assert code == 0 and len(listed) == len(STAGED) + len(CASES) + 1  # + the attached trace
    assert _run(capsys, db, "sweeps")[0] == 0
    code, doc = _run(capsys, db, "advise", "--model", "llama-3-8b", "--params-b", "8",
                     "--concurrency", "16", "--in-len", "512", "--out-len", "256", "--no-store")
    assert code == 0 and doc["arms"], doc
    code, doc = _run(capsys, db, "slo-capacity", "--model", "Qwen/Qwen3-14B", "--itl-p99-ms",
                     "100")
    assert code == 0 and doc["meets"] >= 1, doc
    code, doc = _run(capsys, db, "slo-capacity", "--model", "Qwen/Qwen3-14B", "--ttft-p90-ms",
                     "500")  # the matrix's TTFT tables are Argonne's, not this model's
    assert code == 0 and doc["meets"] == 0 and {a["status"] for a in doc["arms"]} == {
        "unmeasured"}, doc


@pytest.fixture
def matrix_app(matrix, app_env):
    """The app on a copy of the matrix store (and its envelope cache)."""
    shutil.copy(matrix["db"], app_env["db"])
    return matrix


@pytest.mark.parametrize("kind", ["requests", "attached", "gpu_seconds", "series"])
def test_every_page_opens_on_each_demand_kind(matrix_app, kind):
    at = new_app().run()
    at.sidebar.selectbox(key="dataset").set_value(matrix_app["names"][kind]).run()
    pages = DATASET_PAGES + (OWN_INPUT_PAGES if kind == "requests" else ())
    if kind not in TRACES:  # Coverage on the LoRA trace and on the week: tests/ui/test_pages.py
        pages = tuple(p for p in pages if p != "coverage")  # (its cold start: ~4 s each here)
    for page in pages:
        at.switch_page(f"pages/{page}.py").run(timeout=120)
        assert not at.exception, (page, [e.value for e in at.exception])
        assert not [e for e in at.error if "error id" in e.value.lower()], page
