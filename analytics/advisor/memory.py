"""Memory model of a launch arm, as vLLM sizes its KV cache at start-up (see
:func:`memory_fit`): infeasible only when the weights plus a stated overhead do not fit or
the KV cache holds no one sequence; otherwise the cache caps the offered concurrency.
Used by :mod:`analytics.advisor.decide` (the ranking and the backtest share it)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from analytics.hardware import catalog as hardware

if TYPE_CHECKING:  # decide imports this module
    from analytics.advisor.decide import UtilityParams

#: KV bytes per token of the Llama-3.1 GQA configs (config.json: layers x kv heads x head dim x
#: 2 tensors x 2 bytes): 8B 32x8x128 -> 131,072; 405B 126x8x128 -> 516,096. Unknown models use
#: the power law through these two points, ``131072 * (params_b / 8) ** 0.35``.
KV_REF_BYTES, KV_REF_PARAMS_B, KV_EXPONENT = 131_072.0, 8.0, math.log(516_096 / 131_072) / math.log(
    405 / 8)


def kv_bytes_per_token(params_b: float) -> float:
    """Estimated KV-cache bytes per token (16-bit KV) for a GQA transformer of ``params_b``.

    >>> round(kv_bytes_per_token(8)), round(kv_bytes_per_token(405))
    (131072, 516096)
    """
    return KV_REF_BYTES * (params_b / KV_REF_PARAMS_B) ** KV_EXPONENT


#: Bytes per catalogue "GB" of device memory: the catalogue's 40 / 80 GB are binary on the
#: driver's count (nvidia-smi totals: A100 40GB 40,960 MiB = 42.9e9 B, A100 80GB 81,920 MiB,
#: H100 81,559 MiB = 85.5e9 B; modal-labs/modal-client PR #2797), while weights and KV are in
#: 1e9 B: without this factor 70B in 16 bits (140 GB) on 4 x A100-40GB leaves 4 GB, not 15.
#: (For the H100, 80 GiB = 85.9e9 B overstates the driver's 85.5e9 B by 0.4 %.)
DEVICE_BYTES_PER_GB = 2.0 ** 30


def _kv_verdict(base: dict, kv_cap: float, seq_gb: float, concurrency: float,
                tokens: float) -> dict:
    """Feasibility by KV cache: infeasible when one ``tokens``-long sequence does not fit;
    else ``kv_seqs`` full-length sequences fit and the offered concurrency is capped there."""
    kv = concurrency * seq_gb
    seqs = math.floor(kv_cap / seq_gb) if seq_gb > 0 else math.inf
    if seqs < 1:
        return {**base, "kv_gb": kv, "occupancy": kv / kv_cap, "kv_seqs": 0,
                "kv_concurrency": 0.0, "feasible": False, "kv_note": "",
                "why": f"KV cache {kv_cap:.1f} GB holds no {tokens:g}-token sequence "
                       f"({seq_gb:.2f} GB): the server refuses to start"}
    capped = seqs < concurrency
    return {**base, "kv_gb": kv, "occupancy": kv / kv_cap, "kv_seqs": seqs,
            "kv_concurrency": float(min(concurrency, seqs)), "feasible": True, "why": "",
            "kv_note": f"KV cache holds {seqs} of {concurrency:g} concurrent sequences"
                       if capped else ""}


def memory_fit(params_b: float, concurrency: float, tokens: float, arm: dict,
               u: UtilityParams) -> dict:
    """Memory model of one arm, as vLLM sizes its KV cache at start-up.

    vLLM takes ``gpu_memory_utilization`` of each device, loads the weights, profiles one
    forward pass (activations, non-torch memory) and gives the rest to the KV cache; it refuses
    to start when that rest holds no sequence of the model's maximum length ("The model's max
    seq len (N) is larger than the maximum number of tokens that can be stored in KV cache",
    vllm-project/vllm PR #2163, issue #2418) and logs "Maximum concurrency for N tokens per
    request: X x" (issue #10517). A KV cache too small for the offered concurrency does not
    stop the launch: the scheduler runs fewer sequences and preempts the rest (recompute or
    swap), which costs throughput (vLLM docs, Optimization and Tuning: Preemption,
    docs.vllm.ai/en/v0.9.1/configuration/optimization.html). Hence, GB = 1e9 B::

        usable   = n_gpus * memory_gb * DEVICE_BYTES_PER_GB / 1e9 * gpu_mem_util
        overhead = n_gpus * overhead_gb_per_gpu      (activation peak + non-torch memory)
        kv_cap   = usable - weights - overhead;   weights = params_b * bits / 8
        seq_gb   = tokens * kv_bytes_per_token / 1e9
        infeasible  if weights + overhead >= usable, or kv_cap < seq_gb (no sequence fits)
        kv_seqs  = floor(kv_cap / seq_gb);  kv_concurrency = min(concurrency, kv_seqs)
        occupancy = concurrency * seq_gb / kv_cap    (> 1: concurrency capped at kv_seqs)

    Parameters
    ----------
    params_b : parameters, billions; concurrency : offered concurrent sequences
    tokens : tokens per sequence (input + output); arm : hardware, tp, precision[, n_gpus]
    u : :class:`~analytics.advisor.decide.UtilityParams` (``gpu_mem_util``,
        ``overhead_gb_per_gpu``, ``kv_bytes_per_token``)

    Returns
    -------
    dict: ``weights_gb``, ``overhead_gb``, ``kv_capacity_gb``, ``kv_gb`` (need of the offered
    concurrency), ``occupancy``, ``kv_seqs`` (int), ``kv_concurrency``, ``kv_note`` ("KV
    cache holds N of M concurrent sequences" when capped, else ""), ``feasible``, ``why``
    (reason when infeasible, else ""). A NaN ``tokens`` (a source that does not measure the
    input length) gives NaN KV need and occupancy, ``kv_seqs`` None: the arm is feasible by
    weights and overhead alone and gets no KV penalty. Unknown device memory: infeasible.
    """
    mem = hardware.memory_gb(arm["hardware"])
    bits = hardware.PRECISION_BITS.get(hardware.precision(arm["precision"]), 16.0)
    weights = params_b * bits / 8
    base = {"weights_gb": weights, "overhead_gb": None, "kv_capacity_gb": None, "kv_gb": None,
            "occupancy": None, "kv_seqs": None, "kv_concurrency": None, "kv_note": ""}
    if mem is None:
        return {**base, "feasible": False, "why": f"memory of {arm['hardware']} unknown"}
    gpus = arm.get("n_gpus") or arm["tp"]  # pipeline stages split the weights too
    usable = gpus * mem * DEVICE_BYTES_PER_GB / 1e9 * u.gpu_mem_util
    over = gpus * u.overhead_gb_per_gpu
    base = {**base, "overhead_gb": over, "kv_capacity_gb": usable - weights - over}
    if weights + over >= usable:
        return {**base, "feasible": False,
                "why": f"weights {weights:.0f} GB + overhead {over:.1f} GB do not fit "
                       f"{usable:.0f} GB ({gpus} x {mem:g} GB x {u.gpu_mem_util})"}
    seq_gb = tokens * (u.kv_bytes_per_token or kv_bytes_per_token(params_b)) / 1e9
    if not math.isfinite(seq_gb):
        return {**base, "kv_gb": float("nan"), "occupancy": float("nan"), "feasible": True,
                "why": ""}
    return _kv_verdict(base, usable - weights - over, seq_gb, concurrency, tokens)
