"""Which synthetic datasets a command's document was computed from (issue 31 item 9).

A document that drew on a synthetic dataset (the offline demo) gets ``synthetic_datasets``: the
names, in ledger order. A document computed from measured data only is left exactly as it was
(no key), so its bytes do not change. The datasets a command reads are those its arguments name
(``dataset``, ``trace``, ``--jobs``, ...), those its document names (``dataset``, ``inputs``),
every dataset of the kinds it reads whole (the advisor: all benchmarks and job logs), and for
Dispatch the site datasets of ``--sites``.
"""

from __future__ import annotations

#: argument attributes that name a dataset
NAME_ARGS = ("dataset", "trace", "source", "target_trace", "jobs", "inference", "history")
#: commands that compute from datasets (the others list, move or delete them)
ANALYSES = frozenset({"grid", "envelope", "coldstart", "capacity", "dispatch", "telemetry",
                      "advise", "advisor-backtest", "advisor-voi", "serve-energy", "powersim",
                      "slo-capacity", "plan"})
#: commands that read every dataset of these kinds
WHOLE_KINDS = {"advise": ("bench_runs", "jobs"), "advisor-backtest": ("bench_runs", "jobs"),
               "advisor-voi": ("bench_runs", "jobs"), "serve-energy": ("bench_runs",),
               "slo-capacity": ("bench_runs",), "plan": ("bench_runs",)}


def names_read(args, doc: dict) -> set[str]:
    """The dataset names ``args`` and the document ``doc`` name."""
    names = {getattr(args, a) for a in NAME_ARGS if isinstance(getattr(args, a, None), str)}
    if isinstance(doc.get("dataset"), str):
        names.add(doc["dataset"])
    inputs = doc.get("inputs")
    if isinstance(inputs, dict):
        names |= {inputs[k] for k in ("jobs", "inference") if isinstance(inputs.get(k), str)}
    return names


def label(doc, args, db_path) -> None:
    """Add ``synthetic_datasets`` to ``doc`` (a dict) in place when it drew on any."""
    if not isinstance(doc, dict) or getattr(args, "command", None) not in ANALYSES:
        return
    from analytics import store

    try:
        con = store.connect(db_path, read_only=True)
    except Exception:  # noqa: BLE001 - no store to read: nothing synthetic was read either
        return
    with con:
        sites = getattr(args, "sites", None) if args.command == "dispatch" else None
        found = store.synthetic_names(con, names_read(args, doc),
                                      WHOLE_KINDS.get(args.command, ()),
                                      tuple(s.strip() for s in sites.split(",")) if sites else ())
    if found:
        doc["synthetic_datasets"] = found
