"""A fleet plan exported to what runs it (issue 30 item 4): the ``vllm serve`` command of one
replica, a Kubernetes Deployment with a KEDA ``ScaledObject``, a SkyPilot SkyServe service and
a Slurm batch script. Every field is the plan's; nothing here decides.

Field names as their projects document them (looked up, not guessed):

* vLLM engine arguments (``vllm/engine/arg_utils.py``, ``vllm/entrypoints/openai/cli_args.py``;
  https://docs.vllm.ai/en/latest/configuration/engine_args.html): ``--tensor-parallel-size``,
  ``--pipeline-parallel-size``, ``--dtype``, ``--quantization``, ``--max-num-seqs``,
  ``--max-model-len``, ``--host``, ``--port`` (default 8000). The Kubernetes Deployment follows
  vLLM's ``docs/deployment/k8s.md`` (image ``vllm/vllm-openai``, ``command: ["/bin/sh", "-c"]``
  with the whole command as one argument, ``nvidia.com/gpu`` limits, ``/dev/shm`` in memory,
  ``/health`` readiness probe).
* KEDA ``keda.sh/v1alpha1`` ScaledObject (keda-docs 2.21 ``reference/scaledobject-spec.md``,
  ``scalers/cron.md``, ``scalers/prometheus.md``): one ``cron`` trigger per run of UTC hours
  that keep the same planned replicas (``timezone``, ``start`` / ``end`` in 5-field cron,
  ``desiredReplicas`` >= 1: a floor inside the window), and a ``prometheus`` trigger on
  ``sum(vllm:num_requests_waiting{model_name=...})`` whose ``threshold`` is the waiting
  requests per replica (``AverageValue``: replicas = ceil(value / threshold)). The HPA takes
  the largest replica count any trigger asks for.
* SkyServe service YAML (``sky/utils/schemas.py`` ``get_service_schema``):
  ``service.readiness_probe``, ``service.replica_policy`` (``min_replicas``, ``max_replicas``,
  ``target_qps_per_replica``), ``resources.accelerators`` (``NAME:COUNT``), ``resources.ports``,
  ``run``.
* Slurm ``sbatch`` (``doc/man/man1/sbatch.1``): a job array (``--array=0-N``) of identical
  replicas, each ``--nodes=1 --ntasks-per-node=1 --gpus-per-node=G``; Slurm does not resize a
  running array, so it holds the busiest planned hour's replicas.
"""

from __future__ import annotations

import json
import re
import shlex

import pandas as pd
import yaml

from analytics.decisions import fleet, fleet_plan

#: What :func:`render` writes.
TARGETS = ("vllm", "k8s", "skyserve", "slurm")
PORT = 8000
IMAGE = "vllm/vllm-openai:latest"
#: catalog key -> SkyPilot accelerator name (``sky show-gpus``); a kind not listed keeps its key
SKY_ACCELERATORS = {"H100-80GB": "H100", "A100-40GB": "A100", "A100-80GB": "A100-80GB",
                    "H200-141GB": "H200", "B200": "B200", "MI300X": "MI300X"}


#: The most replicas an export writes (a Slurm array, a KEDA maxReplicaCount): a plan above it
#: is refused, not written (a bin's need that large is a wrong scale, not a fleet).
MAX_REPLICAS = 100_000
#: Slurm's --time formats (sbatch.1): minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
_SLURM_TIME = re.compile(r"^(\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+|\d+-\d+:\d{2}"
                         r"|\d+-\d+:\d{2}:\d{2})$")
#: What ends a line or hides text in YAML or a shell comment: C0 / C1 controls, NEL, the
#: Unicode line and paragraph separators and the bidirectional controls.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def check_launchable(model: str, knee: dict) -> None:
    """Refuse (ValueError) an arm whose launch file cannot be written faithfully: a model id
    that a shell or YAML line would not keep as one value, or that reads as a flag; a
    benchmark that ran more GPUs than its TP x PP covers (its expert or data parallel layout
    is not recorded, so ``--tensor-parallel-size`` alone would start it on fewer GPUs)."""
    if not model or model.startswith("-") or _UNSAFE.search(model):
        raise ValueError(f"model id {model!r} starts with '-' or holds a control or line-break "
                         "character: no launch file is written for it")
    gpus, tp = int(knee["n_gpus"]), int(knee["tp"])
    pp = knee.get("pp")
    pp = int(pp) if pp is not None and pd.notna(pp) else 1
    if gpus > tp * pp:
        raise ValueError(f"the benchmark ran {knee['hardware']} x{gpus} at TP{tp}"
                         + (f" x PP{pp}" if pp > 1 else "") + ": the other GPUs were expert or "
                         "data parallel, which the benchmark row does not record, so no launch "
                         "file is written for this arm (choose another with --arm)")


def serve_args(model: str, knee: dict, max_model_len: int | None = None,
               port: int | None = PORT) -> list[str]:
    """``vllm serve`` argv of one replica: the knee's flags
    (:func:`analytics.decisions.fleet.vllm_serve_args`), ``--max-model-len`` when stated, and
    ``--host 0.0.0.0 --port PORT`` (a replica behind a service must listen beyond localhost;
    ``port`` None: no host or port flag). Raises ValueError (:func:`check_launchable`, a
    context length that is not a positive whole number of tokens)."""
    check_launchable(model, knee)
    if max_model_len is not None and not 0 < int(max_model_len) <= 10_000_000:
        raise ValueError(f"--max-model-len must be a positive number of tokens up to 10M, "
                         f"not {max_model_len}")
    args = fleet.vllm_serve_args(model, knee)
    if max_model_len is not None:
        args += ["--max-model-len", str(int(max_model_len))]
    if port is not None:
        args += ["--host", "0.0.0.0", "--port", str(port)]
    return args


def name_of(model: str) -> str:
    """A Kubernetes / SkyServe / Slurm name from a model id: lowercase letters, digits and
    dashes, at most 50 characters (``Qwen/Qwen3-14B`` -> ``qwen3-14b``)."""
    base = model.rsplit("/", 1)[-1].lower()
    return (re.sub(r"[^a-z0-9]+", "-", base).strip("-")[:50].strip("-")) or "llm"


def _comment(lines: list[str]) -> str:
    """``#`` comment lines; user text loses every character that ends a line or hides text
    in YAML or a shell (:data:`_UNSAFE`: plain text only)."""
    return "".join("# " + _UNSAFE.sub(" ", t) + "\n" for t in lines)


def _concurrency(knee: dict) -> str:
    c = knee.get("concurrency")
    return f"{int(c)}" if c is not None and pd.notna(c) else "an unmeasured concurrency"


def _header(model: str, knee: dict, p: fleet_plan.FleetPlan) -> list[str]:
    r = p.risk
    return [f"generated by headroom plan for {model}: {knee['hardware']} x{int(knee['n_gpus'])} "
            f"TP{int(knee['tp'])} {knee['precision']} at concurrency {_concurrency(knee)}"
            f" ({p.replica.tok_s:.0f} output tokens/s per replica at the SLO)",
            f"stated risk {r['total']:g} per {p.bin_s} s bin (demand {r['demand']:g} "
            f"certified with probability {1 - r['delta']:g}, capacity {r['capacity']:g}; "
            "union bound)",
            "planned replicas per UTC hour: " + " ".join(
                str(v) for v in fleet_plan.hourly_minimum(p))]


def cron_windows(hourly: list[int]) -> list[tuple[int, int, int]]:
    """Runs of consecutive UTC hours with the same planned replicas, as ``(start_hour,
    end_hour, replicas)`` with ``end_hour`` exclusive (24 = midnight); hours of 0 replicas
    give no window (a KEDA cron trigger asks for at least one). One run over all 24 hours
    gives none (the ScaledObject's ``minReplicaCount`` holds it).

    >>> cron_windows([2] * 8 + [5] * 12 + [2] * 4)
    [(0, 8, 2), (8, 20, 5), (20, 24, 2)]
    """
    if len(set(hourly)) == 1:
        return []
    out, start = [], 0
    for h in range(1, 25):
        if h == 24 or hourly[h] != hourly[start]:
            if hourly[start] > 0:
                out.append((start, h, hourly[start]))
            start = h
    return out


def most_replicas(p: fleet_plan.FleetPlan) -> int:
    """The most replicas a scaler may reach: the flat peak's, the busiest planned hour's, and
    what the realised demand of any planned bin needed (a burst the reactive trigger exists to
    absorb). Raises ValueError above :data:`MAX_REPLICAS`."""
    top = max(p.peak_replicas, max(fleet_plan.hourly_minimum(p)), fleet_plan.needed_max(p), 1)
    if top > MAX_REPLICAS:
        raise ValueError(f"the plan needs {top:,} replicas at its busiest, over the "
                         f"{MAX_REPLICAS:,} a launch file is written for: lower --scale")
    return top


def kubernetes(model: str, knee: dict, p: fleet_plan.FleetPlan, max_model_len: int | None = None,
               prometheus_url: str | None = None, waiting_per_replica: float | None = None,
               image: str = IMAGE, namespace: str = "default") -> str:
    """A Deployment and its KEDA ScaledObject (two YAML documents, module docstring).

    ``minReplicaCount`` is the plan's quietest hour, ``maxReplicaCount``
    :func:`most_replicas`, the cron triggers carry the planned replicas per UTC hour, and the
    Prometheus trigger (only with ``prometheus_url``, the operator's server) asks for one
    replica per ``waiting_per_replica`` waiting requests (default: the knee's concurrency, one
    replica's batch at ``--max-num-seqs``: a request waits only when every replica runs it)."""
    name, hourly = name_of(model), fleet_plan.hourly_minimum(p)
    if waiting_per_replica is None:
        c = knee.get("concurrency")
        waiting_per_replica = float(c) if c is not None and pd.notna(c) else 1.0
    gpus = str(int(knee["n_gpus"]))
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"replicas": max(min(hourly), 1), "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {
                     "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
                     "containers": [{
                         "name": "vllm", "image": image, "command": ["/bin/sh", "-c"],
                         "args": [shlex.join(serve_args(model, knee, max_model_len))],
                         "ports": [{"containerPort": PORT}],
                         "resources": {"limits": {"nvidia.com/gpu": gpus},
                                       "requests": {"nvidia.com/gpu": gpus}},
                         "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
                         "readinessProbe": {"httpGet": {"path": "/health", "port": PORT},
                                            "initialDelaySeconds": 60, "periodSeconds": 5}}]}}}}
    triggers = [{"type": "cron", "metadata": {
        "timezone": "Etc/UTC", "start": f"0 {a} * * *", "end": f"0 {b % 24} * * *",
        "desiredReplicas": str(n)}} for a, b, n in cron_windows(hourly)]
    notes = []
    if prometheus_url:
        _check_url(prometheus_url)
        query = f'sum(vllm:num_requests_waiting{{model_name="{_promql_string(model)}"}})'
        triggers.append({"type": "prometheus", "metadata": {
            "serverAddress": prometheus_url, "query": query,
            "threshold": f"{waiting_per_replica:g}"}})
    else:
        notes.append("no Prometheus trigger: no Prometheus server was given (--prometheus-url)")
    if not triggers:  # KEDA needs one trigger: the flat plan as a cron over the whole day
        triggers.append({"type": "cron", "metadata": {
            "timezone": "Etc/UTC", "start": "0 0 * * *", "end": "59 23 * * *",
            "desiredReplicas": str(max(hourly[0], 1))}})
    scaled = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
              "metadata": {"name": name, "namespace": namespace},
              "spec": {"scaleTargetRef": {"name": name}, "pollingInterval": 30,
                       "cooldownPeriod": 300, "minReplicaCount": min(hourly),
                       "maxReplicaCount": most_replicas(p),
                       "triggers": triggers}}
    return (_comment(_header(model, knee, p) + notes)
            + yaml.safe_dump_all([deployment, scaled], sort_keys=False))


def _check_url(url: str) -> None:
    """Refuse (ValueError) a Prometheus address that is not an http(s) URL with a host, or
    that holds credentials or characters a YAML value should not carry."""
    import urllib.parse

    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise ValueError(f"--prometheus-url {url!r} is not a valid URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname or _UNSAFE.search(url) \
            or " " in url or parts.username is not None:
        raise ValueError(f"--prometheus-url {url!r} is not an http(s) URL of a Prometheus "
                         "server (without credentials)")


def _promql_string(text: str) -> str:
    """``text`` inside a PromQL double-quoted string: PromQL strings escape as Go's, so JSON's
    escapes (backslash, quote, control characters) are read back as written."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def skyserve(model: str, knee: dict, p: fleet_plan.FleetPlan,
             max_model_len: int | None = None) -> str:
    """A SkyServe service YAML: ``min_replicas`` the plan's quietest hour, ``max_replicas`` the
    flat peak's, ``target_qps_per_replica`` the knee's request rate (output tokens/s / mean
    output length; without a measured length there is no QPS target and the service keeps the
    busiest hour's replicas fixed)."""
    hourly = fleet_plan.hourly_minimum(p)
    out_len = knee.get("out_len")
    accel = SKY_ACCELERATORS.get(knee["hardware"], knee["hardware"])
    notes = []
    qps = p.replica.tok_s / float(out_len) if out_len is not None and pd.notna(out_len) \
        and out_len > 0 else None
    if qps is not None and qps >= 1e-4:
        policy = {"replica_policy": {
            "min_replicas": min(hourly), "max_replicas": most_replicas(p),
            "target_qps_per_replica": float(f"{qps:.4g}")}}
    else:
        policy = {"replicas": max(hourly)}
        notes.append("fixed replicas: the knee run measured no output length, so no QPS target")
    doc = {"service": {"readiness_probe": {"path": "/v1/models",
                                           "initial_delay_seconds": 1200}, **policy},
           "resources": {"accelerators": f"{accel}:{int(knee['n_gpus'])}", "ports": PORT},
           "setup": "pip install vllm",
           "run": shlex.join(serve_args(model, knee, max_model_len))}
    return _comment(_header(model, knee, p) + notes) + yaml.safe_dump(doc, sort_keys=False)


def slurm(model: str, knee: dict, p: fleet_plan.FleetPlan, max_model_len: int | None = None,
          time_limit: str = "1-00:00:00") -> str:
    """An ``sbatch`` script: a job array of the busiest planned hour's replicas, one node and
    the arm's GPUs each, every task serving on port 8000 + its array index."""
    if not _SLURM_TIME.match(str(time_limit)):
        raise ValueError(f"--time-limit {time_limit!r} is not a Slurm time (minutes, MM:SS, "
                         "HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)")
    hourly = fleet_plan.hourly_minimum(p)
    n = max(max(hourly), 1)
    if n > MAX_REPLICAS:
        raise ValueError(f"the plan needs {n:,} replicas, over the {MAX_REPLICAS:,} a launch "
                         "file is written for: lower --scale")
    argv = serve_args(model, knee, max_model_len, port=None)
    lines = ["#!/bin/bash", f"#SBATCH --job-name={name_of(model)}", "#SBATCH --nodes=1",
             "#SBATCH --ntasks-per-node=1", f"#SBATCH --gpus-per-node={int(knee['n_gpus'])}",
             f"#SBATCH --time={time_limit}", f"#SBATCH --array=0-{n - 1}",
             "#SBATCH --output=slurm-%A_%a.out"]
    body = ['PORT=$((8000 + SLURM_ARRAY_TASK_ID))',
            "srun " + shlex.join(argv) + ' --host 0.0.0.0 --port "$PORT"']
    note = [f"Slurm does not resize a running array: {n} replicas, the busiest planned hour"]
    return "\n".join(lines) + "\n" + _comment(_header(model, knee, p) + note) + "\n".join(
        body) + "\n"


def render(target: str, model: str, knee: dict, p: fleet_plan.FleetPlan, **options) -> str:
    """The file of ``target`` (:data:`TARGETS`). ``options``: ``max_model_len`` (every target),
    ``prometheus_url``, ``waiting_per_replica`` (k8s), ``time_limit`` (slurm). Raises
    ValueError for an unknown target."""
    if target == "vllm":
        return shlex.join(serve_args(model, knee, options.get("max_model_len"))) + "\n"
    makers = {"k8s": kubernetes, "skyserve": skyserve, "slurm": slurm}
    if target not in makers:
        raise ValueError(f"unknown export target {target!r}; choose one of {', '.join(TARGETS)}")
    keep = {"k8s": ("max_model_len", "prometheus_url", "waiting_per_replica"),
            "skyserve": ("max_model_len",), "slurm": ("max_model_len", "time_limit")}[target]
    return makers[target](model, knee, p, **{k: v for k, v in options.items()
                                              if k in keep and v is not None})
