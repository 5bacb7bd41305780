"""The light commands stay light (issue 15): importing the CLI and building its parser must not
import the envelope's and the advisor's libraries, and ``headroom datasets`` must not import
pandas, numpy or polars (the store's table definitions are plain SQL types,
:data:`analytics.schema.COLUMNS`). Each check runs in a fresh interpreter and reads
``sys.modules`` there, so it fails as soon as someone adds one of these imports back at module level."""

from __future__ import annotations

import json
import subprocess
import sys

from harness import REPO, SHARED_DATA

HEAVY = ("mapie", "sklearn", "lightgbm", "scipy", "plotly")


def _imported(code: str) -> list[str]:
    probe = (f"{code}\nimport json, sys\n"
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_cli_import_and_parsers_do_not_import_heavy_libraries():
    # the whole parser (every family in full), and the light path main() takes
    got = _imported("import analytics.cli as cli\ncli.parser()\ncli.parser('datasets')\n"
                    "cli.parser('')")
    assert not set(HEAVY) & set(got), sorted(set(HEAVY) & set(got))
    # the --help path (only the top-level listing) needs neither the store nor pandas
    light = _imported("import analytics.cli as cli\ncli.parser('')")
    assert not {"pandas", "numpy", "polars", "duckdb", *HEAVY} & set(light)


def test_datasets_command_reads_the_ledger_without_pandas_or_polars(tmp_path):
    db = tmp_path / "s.duckdb"
    got = _imported("import analytics.cli as cli, contextlib, io\n"
                    f"with contextlib.redirect_stdout(io.StringIO()):\n"
                    f"    assert cli.main(['--db', {str(db)!r}, 'datasets']) == 0")
    banned = {"pandas", "numpy", "polars", *HEAVY}
    assert not banned & set(got), sorted(banned & set(got))


def test_ingest_of_a_small_trace_reads_it_without_pandas_or_numpy(tmp_path):
    """Issue 35 item 3: a newcomer's first ``headroom ingest`` (the BurstGPT head, 400 rows)
    parses with polars and stores with DuckDB; pandas and numpy (0.36 s of its CPU when the
    logging-gap rule imported them at module import) load only where a format needs them."""
    small = SHARED_DATA / "burstgpt" / "BurstGPT_1_head400.csv"
    db = tmp_path / "s.duckdb"
    got = _imported("import analytics.cli as cli, contextlib, io\n"
                    "with contextlib.redirect_stdout(io.StringIO()):\n"
                    f"    assert cli.main(['--db', {str(db)!r}, 'ingest', {str(small)!r}]) == 0")
    banned = {"pandas", "numpy", "pyarrow", *HEAVY}
    assert not banned & set(got), sorted(banned & set(got))
    assert "polars" in got and "duckdb" in got


def test_polars_dtypes_follow_the_sql_types():
    # CANONICAL (polars, built on first use) and COLUMNS (SQL, the DDL) are one schema
    import polars as pl

    from analytics import schema

    sql_of = {pl.Datetime("us"): "TIMESTAMP", pl.String: "VARCHAR", pl.Int64: "BIGINT",
              pl.Int32: "INTEGER", pl.Float64: "DOUBLE", pl.Boolean: "BOOLEAN"}
    assert list(schema.CANONICAL) == list(schema.COLUMNS)
    for table, cols in schema.COLUMNS.items():
        assert {c: sql_of[t] for c, t in schema.CANONICAL[table].items()} == cols


def test_lazy_choices_still_refuse_and_list_values(capsys):
    from analytics import cli

    ap = cli.parser("envelope")
    assert ap.parse_args(["envelope", "x", "--base-model", "ridge"]).base_model == "ridge"
    try:
        ap.parse_args(["envelope", "x", "--base-model", "nope"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_the_apps_services_and_decisions_import_no_fitting_library():
    """Issue 35: the app's page layer (``analytics.ui.cache``: every service, the capacity,
    dispatch and mix decisions, the envelope pipeline) imports scikit-learn, SciPy, MAPIE and
    LightGBM only where it fits or solves (1.9 s of CPU a served app and a CLI process paid at
    import: the capacity decision's MAPIE p-value, the dispatch LP, the GPU-mix MILP)."""
    got = _imported("import analytics.ui.cache, analytics.ui.widgets\n"
                    "import analytics.decisions.capacity, analytics.decisions.dispatch\n"
                    "import analytics.envelope.pipeline, analytics.services.envelope_cache")
    assert not {"mapie", "sklearn", "lightgbm", "scipy"} & set(got), sorted(
        {"mapie", "sklearn", "lightgbm", "scipy"} & set(got))


def test_the_one_thread_limit_reaches_the_fitters_imported_on_use():
    """The envelope imports LightGBM and scikit-learn where it fits (issue 35), and threadpoolctl
    limits only libraries already loaded: ``forecast.single_threaded`` must load them first, or
    the one-thread rule of issue 15 (a second OpenMP thread mostly spin-waits on these small
    fits) is silently lost. In a fresh interpreter: every OpenMP and BLAS pool, LightGBM's and
    scikit-learn's among them, at one thread inside it."""
    probe = ("import json, sys\nfrom threadpoolctl import threadpool_info\n"
             "from analytics.envelope import forecast\n"
             "assert 'lightgbm' not in sys.modules\n"
             "with forecast.single_threaded():\n"
             "    print(json.dumps([(i['user_api'], i['num_threads'], i['filepath']) "
             "for i in threadpool_info()]))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    pools = json.loads(out.splitlines()[-1])
    assert {api for api, _, _ in pools} >= {"openmp", "blas"}
    assert any(api == "openmp" and "scikit_learn" in path for api, _, path in pools)
    assert all(threads == 1 for _, threads, _ in pools), pools
