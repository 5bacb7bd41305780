"""The DuckDB store: connection, migration runner and every SQL statement headroom runs.

The package is :mod:`~analytics.store.core` (connections, migrations, :func:`_run`,
:func:`transaction`), :mod:`~analytics.store.writes` (ingest, delete, appends) and
:mod:`~analytics.store.reads` (the ledger, grids, site series, jobs, benchmarks); callers use
the names re-exported here. It is the only package that imports ``duckdb``. Every function
opens its own cursor (``with con.cursor() as cur``), because DuckDB refuses concurrent use of
one connection from several threads and Streamlit runs sessions on threads. Results are
materialised (pandas) before they are returned.

**Sharing the store.** DuckDB lets one process write a database file, or several read it. So
connections are short-lived (the app and the CLI open one per request or command and close it),
readers open it read-only (:func:`connect` with ``read_only=True``: the app's pages, the CLI's
read commands) and writers read-write. An open that meets a lock held by another process (or a
connection of the other mode in this one) is retried with exponential back-off for ``wait_s``
seconds (``$HEADROOM_STORE_WAIT_S``, default 20); if the store stays busy, :class:`StoreBusy`
names the process that holds it and what to do.

Ingest is one transaction: a batch of parsed files is written completely or not at all, and a
file whose bytes (sha256) are already in the ledger is reported as ``duplicate`` and skipped.

The forward migrations (:data:`MIGRATIONS`, :data:`SCHEMA_VERSION`) live in
:mod:`analytics.store.migrations`, built from the canonical columns of :mod:`analytics.schema`;
``dataset_files`` (schema 14) lists every file a dataset was built from; ``requests`` is a view over
the stored tables :func:`stored_tables` names (schema 13), which only the writes address.
Every statement runs through :func:`_run`, so a failing statement raises :class:`StoreError`
with the SQL attached (the Splink pattern: the database error, then the statement that failed), and
every multi-statement write runs inside :func:`transaction`.
"""

from analytics.schema import stored_tables  # noqa: F401 - the tables behind a view
from analytics.store.appends import APPENDABLE, AppendRefused  # noqa: F401
from analytics.store.attached import attached_names, files_stamp  # noqa: F401
from analytics.store.attached import local_files as attached_paths  # noqa: F401
from analytics.store.attached import status as attached_status  # noqa: F401
from analytics.store.attached_files import AttachedChanged, AttachRefused  # noqa: F401
from analytics.store.core import (  # noqa: F401
    DATA_TABLES,
    MIGRATIONS,
    SCHEMA_VERSION,
    NameTaken,
    NotAStore,
    StoreBusy,
    StoreError,
    StoreOutdated,
    StoreRefused,
    UnknownDataset,
    _run,
    connect,
    data_version,
    db_path,
    default_wait_s,
    file_stamp,
    identify,
    migrate,
    migrate_file,
    transaction,
)
from analytics.store.live import (  # noqa: F401
    live_bins,
    live_run,
    live_runs,
    live_stamp,
    save_live_bins,
    series_name,
    start_live_run,
)
from analytics.store.reads import (  # noqa: F401
    SITE_TABLES,
    bench_runs,
    copy_dataset,
    dataset,
    dataset_rows,
    demand_minutes,
    gpu_jobs,
    gpu_jobs_left_out,
    jobs,
    ledger_records,
    list_datasets,
    model_versions,
    reference_cdfs,
    request_fields,
    requests_grid,
    series_grid,
    site_catalog,
    site_hourly,
    synthetic_names,
    table_counts,
)
from analytics.store.scenarios import (  # noqa: F401
    MAX_SCENARIO_NAME,
    delete_scenario,
    save_scenario,
    scenarios,
)
from analytics.store.summaries import dataset_summary  # noqa: F401
from analytics.store.sweeps import (  # noqa: F401
    KEY_COLUMNS,
    delete_sweep,
    save_sweep_runs,
    sweep_points,
    sweep_results,
    sweep_runs,
)
from analytics.store.writes import (  # noqa: F401
    IngestItem,
    add_model_version,
    append_rows,
    delete_dataset,
    ingest,
)
