"""Issue 19 item 5: a refused analysis is cached like a result, so a revisit says why at once
instead of refitting before failing again."""

from __future__ import annotations

import pytest
from harness import case_file

from analytics.envelope.pipeline import EnvelopeParams


def test_a_refused_envelope_is_kept_and_not_recomputed(app_env):
    from analytics import store
    from analytics.ingest import files as ingest
    from analytics.services import demand
    from analytics.ui import cache

    path = case_file("13-mooncake-optional-fields.jsonl")  # 4 requests in one second
    con = store.connect(app_env["db"])
    ingest.ingest_files(con, [ingest.FileIn(path, path.name)])
    name = store.list_datasets(con)["name"].iloc[0]
    con.close()
    calls = []

    def envelope(con, req, params):  # the real service, counted
        calls.append(req)
        return demand.envelope(con, req, params)

    fit = cache.cached(envelope)
    req = demand.GridRequest(name, 300)
    with pytest.raises(ValueError) as first:
        fit(req, EnvelopeParams())
    with pytest.raises(ValueError) as again:
        fit(req, EnvelopeParams())
    assert str(again.value) == str(first.value) and len(calls) == 1
    with pytest.raises(ValueError):
        fit(demand.GridRequest(name, 60), EnvelopeParams())  # other parameters: computed
    assert len(calls) == 2
