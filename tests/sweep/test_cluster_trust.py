"""Issue 34, item 1: the Dask scheduler is operator configuration, never a page field.

A scheduler's replies are unpickled, so whoever picks the address runs code in the process that
connects: the fake scheduler here (``tests/fake_scheduler.py``) proves it on a process that
connects to it, and the app is shown to give a browser user no way to make the server connect
anywhere. A peer that never answers is refused within the stated time, and a remote cluster can
be reached over Dask's TLS with the operator's CA (certificates made here with ``openssl``).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from harness import REPO, fake_scheduler, make_certs, new_app

from analytics.sweep import Cluster, Task, connect_client, operator_cluster, run_sweep
from analytics.sweep.cluster import handshake


def test_a_hostile_scheduler_runs_code_in_the_process_that_connects(tmp_path):
    """Why the address is not a page field: a process that connects to the fake scheduler
    unpickles its reply, and the payload creates the marker file in that process."""
    with fake_scheduler(tmp_path) as (address, marker, log):
        subprocess.run([sys.executable, "-c", "from analytics.sweep import connect_client\n"
                        f"connect_client({address!r}, timeout_s=1)"], cwd=REPO,
                       capture_output=True, timeout=60)
        assert marker.exists()
        assert log.read_text().count("connection") >= 1


def test_the_bounded_handshake_deserializes_nothing_the_peer_sends(tmp_path):
    """:func:`handshake` reads the fake's handshake, which carries the pickled payload, without
    unpickling it: it completes and no marker appears."""
    with fake_scheduler(tmp_path) as (address, marker, log):
        handshake(Cluster(address), timeout_s=5)
        assert not marker.exists()


def test_a_peer_that_never_answers_is_refused_within_the_timeout(tmp_path):
    """A listener that accepts and never answers hung ``Client(timeout="3s")`` for over 200 s;
    the bounded connection gives up after its timeout and says so."""
    with fake_scheduler(tmp_path, silent=True) as (address, _, log):
        start = time.monotonic()
        with pytest.raises(ValueError, match="no handshake within 2 s"):
            connect_client(address, timeout_s=2)
        assert time.monotonic() - start < 8
        assert log.read_text().count("connection") == 1


def test_the_operators_cluster_comes_from_flag_env_or_secrets(monkeypatch):
    monkeypatch.delenv("HEADROOM_DASK_SCHEDULER", raising=False)
    for name in ("CA", "CERT", "KEY"):
        monkeypatch.delenv(f"HEADROOM_DASK_TLS_{name}", raising=False)
    assert operator_cluster() is None
    assert operator_cluster("local") is None
    got = operator_cluster(None, {"scheduler": "tls://h:8786", "tls_ca_file": "/ca.pem"})
    assert (got.address, got.tls_ca_file, got.source) == ("tls://h:8786", "/ca.pem",
                                                         "secrets.toml [dask]")
    monkeypatch.setenv("HEADROOM_DASK_SCHEDULER", "tcp://env:1")
    monkeypatch.setenv("HEADROOM_DASK_TLS_CA", "/env-ca.pem")
    got = operator_cluster(None, {"scheduler": "tls://h:8786", "tls_ca_file": "/ca.pem"})
    assert (got.address, got.tls_ca_file, got.source) == ("tcp://env:1", "/env-ca.pem",
                                                         "$HEADROOM_DASK_SCHEDULER")
    assert operator_cluster("tcp://flag:2").source == "--cluster"


def test_the_app_has_no_scheduler_field_and_a_browser_cannot_make_it_connect(app_env, tmp_path,
                                                                            monkeypatch):
    """No text input in the sidebar; the old field's session key and a link's query parameter
    naming the fake scheduler leave the server connecting nowhere."""
    monkeypatch.delenv("HEADROOM_DASK_SCHEDULER", raising=False)
    with fake_scheduler(tmp_path) as (address, marker, log):
        at = new_app()
        at.session_state["dask_scheduler"] = address
        at.query_params["dask_scheduler"] = address
        at.run()
        assert not at.exception
        assert not at.sidebar.text_input
        assert any("Sweeps run on this machine" in c.value for c in at.sidebar.caption)
        from analytics.ui import cluster

        assert cluster.backend() is None
        assert log.read_text() == "" and not marker.exists()


def test_an_operator_scheduler_that_never_answers_leaves_the_page_usable(app_env, tmp_path,
                                                                        monkeypatch):
    with fake_scheduler(tmp_path, silent=True) as (address, _, log):
        monkeypatch.setenv("HEADROOM_DASK_SCHEDULER", address)
        start = time.monotonic()
        at = new_app().run()
        assert time.monotonic() - start < 30
        assert not at.exception
        assert any("did not answer" in w.value for w in at.sidebar.warning)
        assert address not in " ".join(w.value for w in at.sidebar.warning)


def test_a_tls_cluster_runs_sweeps_only_for_a_client_with_the_operators_ca(tmp_path):
    distributed = pytest.importorskip("distributed")
    from distributed.security import Security

    ok, other = make_certs(tmp_path, "ops"), make_certs(tmp_path, "other")
    sec = Security(tls_ca_file=ok["ca"], tls_scheduler_cert=ok["cert"],
                   tls_scheduler_key=ok["key"], tls_worker_cert=ok["cert"],
                   tls_worker_key=ok["key"], tls_client_cert=ok["cert"],
                   tls_client_key=ok["key"], require_encryption=True)
    tasks = [Task("test.echo", "analytics.sweep.worker:noop", {"x": i}, seed=i)
             for i in range(3)]
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  protocol="tls://", host="127.0.0.1", security=sec,
                                  dashboard_address=None) as lc:
        address = lc.scheduler_address
        good = Cluster(address, ok["ca"], ok["cert"], ok["key"], source="test")
        assert good.tls
        out = run_sweep(tasks, backend=good)
        assert out.backend == address and out.computed == 3
        assert out.results == [{"seed": i, "x": i, "shared": {}} for i in range(3)]
        with pytest.raises(ValueError, match="TLS address but no CA file"):
            connect_client(Cluster(address))
        with pytest.raises(ValueError, match="no Dask scheduler answered"):
            connect_client(Cluster(address, other["ca"], other["cert"], other["key"]),
                           timeout_s=3)
        with pytest.raises(ValueError, match="no Dask scheduler answered"):  # plain TCP to TLS
            connect_client(Cluster(address.replace("tls://", "tcp://")), timeout_s=3)
