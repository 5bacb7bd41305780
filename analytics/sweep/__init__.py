"""Sweeps: many seeded runs of one pure function, on this machine or a Dask cluster, stored and
resumable (issue 17). One runner for the CLI, the pages and the benches.

API
---
``Task(analysis, fn, params, seed)``
    ``analysis``: a name (``"power.sweep_point"``); ``fn``: ``"package.module:function"``, a
    pure top-level function ``fn(params: dict, seed: int, **shared) -> dict`` (JSON-able;
    non-finite floats become null); ``params``: JSON-able dict; ``seed``: the task's only
    source of randomness (so the same task gives the same numbers on any backend).

``run_sweep(tasks, *, shared=None, key_inputs=None, store=None, backend=None, progress=None,
cancel=None) -> SweepResult``
    - ``shared``: name -> value passed to every task as a keyword (job arrays, fitted inputs,
      profiles, grids). Sent once per local worker (pool initializer) or ``client.scatter``-ed
      once with ``broadcast=True`` on Dask and passed as futures, never re-sent per task. Not
      hashed: what it was built from goes into ``key_inputs``.
    - ``key_inputs``: name -> sha256 of every input dataset (and anything else the shared data
      was built from, e.g. a fit seed); hashed into the key's ``inputs_sha256``.
    - ``store``: path of the DuckDB store, or None (nothing read or kept). With a store, each
      task's key ``(analysis, params_sha256, seed, code_version, inputs_sha256)`` is looked up
      first (one short read-only connection): a stored task is read, not computed; every task
      that finishes is written at once (one short write connection per task, none held while
      tasks run), so a cancelled or crashed sweep keeps its finished tasks and a rerun computes
      only the missing ones. ``code_version`` hashes the sources of ``fn``'s package
      (:func:`analytics.sweep.keys.code_version`).
    - ``backend``: None or ``"local"`` (a process pool of min(cores, tasks) workers; serial when
      one task or one core), ``"serial"`` (in this process), or the operator's Dask cluster: a
      :class:`Cluster` (address and TLS files) or an address ``"tcp://HOST:8786"``
      (``distributed.Client``; the dashboard link is in the result). A front end picks it with
      :func:`resolve_backend` (``--cluster``, else ``$HEADROOM_DASK_SCHEDULER``, else the app's
      ``[dask]`` secrets, else local): operator configuration, never a page field, because a
      scheduler's replies are unpickled (:mod:`analytics.sweep.cluster`).
    - ``progress``: ``callable(done, total[, label])`` after the cache lookup, after every
      task, and on the local pool each second no task finishes, with ``label`` saying what
      runs (a Streamlit :class:`analytics.ui.progress.Progress` or a tqdm update). An
      exception it raises (Streamlit stopping the run for a Cancel click) stops the sweep like
      ``cancel``.
    - ``cancel``: ``callable() -> bool`` polled after every finished task (and each heartbeat);
      True stops the sweep:
      queued tasks are cancelled (``cancel_futures`` / ``client.cancel``), running local workers
      terminated, :class:`SweepCancelled` raised with the partial result (finished tasks
      stored). Ctrl-C does the same.

    ``SweepResult``: ``results`` (task order), ``computed``, ``cached``, ``timings`` (per task
    ``cpu_s``, ``wall_s``, ``ran_on``, ``cached``), ``backend`` (``serial``, ``local`` or the
    scheduler address), ``workers``, ``wall_s``, ``dashboard``, ``unsaved``; ``summary()`` is
    the block a CLI document carries.

Replications: :mod:`analytics.sweep.stats` gives each point's mean and 95 % t-interval
(``replicate_table``) and verdicts stated with their uncertainty (true / false / "not
distinguishable").

Adding an analysis (the serving sensitivity, advisor-backtest folds, an envelope atlas): write
a top-level ``fn(params, seed, **shared) -> dict`` in the analysis package, build one
:class:`Task` per point x replication in the service, pass the fitted inputs as ``shared`` and
the input datasets' sha256s (``store.dataset(con, name)["sha256"]``) as ``key_inputs``, then
aggregate ``SweepResult.results`` with ``replicate_table``. The power sweep
(:mod:`analytics.power.sweep_points`, :func:`analytics.services.power.sweep`) is the example.

Transport: the local pool and Dask send tasks and shared data to workers with pickle (in
memory, between processes this user started); nothing pickled is ever written to disk: stored
results are JSON.
"""

from analytics.sweep.cluster import (  # noqa: F401
    ENV_SCHEDULER,
    Cluster,
    connect_client,
    operator_cluster,
)
from analytics.sweep.runner import (  # noqa: F401
    SweepCancelled,
    SweepResult,
    Task,
    cores,
    resolve_backend,
    run_sweep,
)
from analytics.sweep.stats import NOT_DISTINGUISHABLE, mean_ci, replicate_table  # noqa: F401
