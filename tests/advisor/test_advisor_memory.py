"""Launch advisor memory model (issue 18 follow-up): infeasible only when the weights plus the
stated overhead do not fit or the KV cache holds no one sequence (vLLM refuses to start then);
a cache too small for the offered concurrency caps it and the arm is scored at a full cache.
Every number below is derived by hand from the formulas of :func:`memory.memory_fit`."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analytics.advisor import decide, memory

GB = 2 ** 30 / 1e9  # bytes of a catalogue "GB", in 1e9 B (nvidia-smi: A100 40GB 40,960 MiB)


def _fit(params_b, concurrency, tokens, hw, tp, precision="bf16", **kw):
    return memory.memory_fit(params_b, concurrency, tokens,
                             {"hardware": hw, "tp": tp, "precision": precision},
                             decide.UtilityParams(**kw))


def test_weights_plus_overhead_do_not_fit():
    """38B in 16 bits = 76 GB on 1 x A100-80GB: usable 80 x 1.073741824 x 0.9 = 77.31 GB; the
    weights alone fit, weights + 2.6 GB overhead = 78.6 GB do not."""
    usable = 80 * GB * 0.9
    assert usable == pytest.approx(77.309411328)
    m = _fit(38, 1, 2048, "A100-80GB", 1)
    assert not m["feasible"] and m["weights_gb"] == 76.0 and m["overhead_gb"] == 2.6
    assert m["why"] == "weights 76 GB + overhead 2.6 GB do not fit 77 GB (1 x 80 GB x 0.9)"
    assert m["kv_capacity_gb"] == pytest.approx(usable - 78.6)
    assert _fit(38, 1, 2048, "A100-80GB", 1, overhead_gb_per_gpu=0.0)["feasible"]


def test_one_sequence_does_not_fit_the_kv_cache():
    """8B in 16 bits on 1 x A100-40GB: KV capacity 40 x 1.073741824 x 0.9 - 16 - 2.6 = 20.05
    GB; one 200,000-token sequence needs 200,000 x 131,072 B = 26.21 GB (vLLM: "max seq len
    ... larger than the maximum number of tokens that can be stored in KV cache"); one of
    100,000 tokens (13.11 GB) fits."""
    cap = 40 * GB * 0.9 - 16 - 2.6
    m = _fit(8, 1, 200_000, "A100-40GB", 1)
    assert m["kv_capacity_gb"] == pytest.approx(cap) and cap == pytest.approx(20.054705664)
    assert not m["feasible"] and m["kv_seqs"] == 0
    assert m["why"] == ("KV cache 20.1 GB holds no 200000-token sequence (26.21 GB): "
                        "the server refuses to start")
    ok = _fit(8, 1, 100_000, "A100-40GB", 1)
    assert ok["feasible"] and ok["kv_seqs"] == 1 and ok["kv_note"] == ""
    assert ok["occupancy"] == pytest.approx(13.1072 / cap)


def test_concurrency_is_capped_at_what_the_kv_cache_holds():
    """70B fp16 on 4 x A100-40GB (the measured Argonne runs): capacity 4 x 40 x 1.073741824 x
    0.9 - 140 - 4 x 2.6 = 4.2188 GB; a 1,024 + 1,024-token sequence needs 2,048 x
    kv_bytes_per_token(70) = 2,048 x 279,570 B = 0.57256 GB, so the cache holds floor(7.37) = 7
    of 64 sequences: feasible, occupancy 64 x 0.57256 / 4.2188 = 8.686, scored at a full cache:
    KV factor 1 - 2 x (1 - 0.85) = 0.7 (the served tokens fall by 30 %)."""
    kvb = 131_072 * (70 / 8) ** (math.log(516_096 / 131_072) / math.log(405 / 8))
    assert kvb == pytest.approx(279_569.8, abs=0.1)
    cap, seq = 4 * 40 * GB * 0.9 - 140 - 10.4, 2048 * kvb / 1e9
    assert cap == pytest.approx(4.218822656) and seq == pytest.approx(0.572559, abs=1e-6)
    m = _fit(70, 64, 2048, "A100-40GB", 4, "fp16")
    assert m["feasible"] and m["why"] == "" and m["kv_seqs"] == 7 == math.floor(cap / seq)
    assert m["kv_concurrency"] == 7.0
    assert m["kv_note"] == "KV cache holds 7 of 64 concurrent sequences"
    assert m["occupancy"] == pytest.approx(64 * seq / cap) == pytest.approx(8.6858, abs=1e-4)
    u = decide.UtilityParams(prices_usd_per_gpu_h={"A100-40GB": 2.0})
    assert decide.kv_factor(m["occupancy"], u) == pytest.approx(0.7)
    arms_df = pd.DataFrame([{"hardware": "A100-40GB", "tp": 4, "precision": "fp16",
                             "n_gpus": 4, "params_b": 70.0, "concurrency": 64.0,
                             "in_len": 1024.0, "out_len": 1024.0}])
    mems, terms = decide.score_arms(arms_df, [100.0], [1600.0], [0.0], u, decide.Context())
    assert mems[0]["kv_note"] == m["kv_note"] and terms["occupancy"][0] == m["occupancy"]
    assert terms["kv_factor"][0] == pytest.approx(0.7)
    assert terms["served_tokens"][0] == pytest.approx(100.0 * 0.7 * 3600)
    # 7 sequences fit exactly: no cap, occupancy 7 x 0.57256 / 4.2188 = 0.950, factor 0.800
    m7 = _fit(70, 7, 2048, "A100-40GB", 4, "fp16")
    assert m7["kv_note"] == "" and m7["kv_concurrency"] == 7.0
    assert decide.kv_factor(m7["occupancy"], u) == pytest.approx(1 - 2 * (7 * seq / cap - 0.85))


def test_unknown_input_length_is_feasible_by_weights_alone():
    m = _fit(8, 64, float("nan"), "A100-40GB", 1)
    assert m["feasible"] and np.isnan(m["occupancy"]) and m["kv_seqs"] is None
