"""Workload of the serving what-ifs: a request trace -> arrival / prompt / output arrays, the Zipf
assignment of requests to co-hosted models, and the model slots (profiles per model).

Requests -> models
    Model popularity is Zipf: ``p_j ~ 1 / rank_j**zipf_s`` with the ranks shuffled by the seeded
    generator (which model is popular is random, the skew is not); each request draws its model
    from ``p`` (``zipf_s`` is a parameter, default 1.0: no staged trace names the models).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analytics.serving.profiles import Profile


def trace_arrays(requests: pd.DataFrame, window_s: float | None = None,
                 start_s: float = 0.0) -> pd.DataFrame:
    """Arrivals from a ``requests`` table: ``arrival_s`` (from the first request kept),
    ``prompt``, ``output`` tokens (each >= 1), in time order, optionally only the requests from
    ``start_s`` seconds after the trace's first request on (the quantile length predictor's fit
    window comes before: :mod:`analytics.serving.prediction`) and of those the first
    ``window_s`` seconds.

    A request whose prompt or completion count is empty (a Mooncake line without
    ``output_length``) is simulated with 1 token there, the minimum a request has; how many
    such requests the returned window holds is ``out.attrs["unknown_tokens"]`` (the serving
    comparison states it in its notes).

    Raises ValueError when the trace has no token counts (e.gpu. GPU-seconds-only traces).
    """
    if requests.empty:
        raise ValueError("the trace has no requests")
    if requests["prompt_tokens"].isna().all() or requests["completion_tokens"].isna().all():
        raise ValueError("the trace has no prompt / completion token counts; the serving "
                         "simulation needs both (e.gpu. the Azure LLM or Mooncake traces)")
    ts = pd.to_datetime(requests["ts"]).to_numpy("datetime64[us]").astype(np.int64) / 1e6
    order = np.argsort(ts, kind="stable")
    t = ts[order] - ts[order][0]
    unknown = (requests["prompt_tokens"].isna() | requests["completion_tokens"].isna()
               ).to_numpy()[order]
    out = pd.DataFrame({
        "arrival_s": t,
        "prompt": np.maximum(requests["prompt_tokens"].fillna(1).to_numpy(np.int64)[order], 1),
        "output": np.maximum(requests["completion_tokens"].fillna(1).to_numpy(np.int64)[order],
                             1),
    })
    n_unknown = int(unknown.sum())
    if start_s > 0:
        keep = (out["arrival_s"] >= start_s).to_numpy()
        out, unknown = out[keep].reset_index(drop=True), unknown[keep]
        if len(out):
            out["arrival_s"] -= out["arrival_s"].iloc[0]
        n_unknown = int(unknown.sum())
    if window_s is not None:
        keep = (out["arrival_s"] < window_s).to_numpy()
        out = out[keep].reset_index(drop=True)
        n_unknown = int(unknown[keep].sum())
    out.attrs["unknown_tokens"] = n_unknown
    return out


def assign_models(n_requests: int, n_models: int, zipf_s: float,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Zipf model popularity with seeded ranks, and one model per request.

    Returns ``(model_of_request (n_requests,), popularity (n_models,))``.
    """
    ranks = rng.permutation(n_models) + 1
    pop = 1.0 / ranks.astype(float) ** zipf_s
    pop /= pop.sum()
    return rng.choice(n_models, size=n_requests, p=pop), pop


def model_slots(profiles: list[Profile], n_models: int) -> list[Profile]:
    """``n_models`` co-hosted models: the bench profiles cycled in model-id order."""
    if not profiles:
        raise ValueError("no serving profiles")
    return [profiles[i % len(profiles)] for i in range(n_models)]
