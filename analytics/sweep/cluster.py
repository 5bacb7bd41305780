"""Which Dask cluster sweeps run on, and the one bounded way to connect to it.

The cluster is **operator configuration**: the CLI's ``--cluster``, the environment
(``$HEADROOM_DASK_SCHEDULER``), or ``[dask]`` in ``.streamlit/secrets.toml`` for the app. It is
never a page field: Dask's protocol unpickles what the scheduler sends, so whoever chooses the
address can run code in the process that connects (a fake scheduler's reply did, in the app's
server, while the sidebar had an address field). A Dask cluster must therefore be *trusted* as
this process's own code is. For a remote one, use TLS (``tls://HOST:8786`` and
:class:`distributed.security.Security`): the scheduler's certificate is checked against the
operator's CA and the client presents its own, so a host that cannot show the CA's certificate
is refused before any message is read.

TLS settings (each from the environment, else ``[dask]`` in the app's secrets):

==========================  ====================  ===========================================
environment                 secrets key           meaning
==========================  ====================  ===========================================
``HEADROOM_DASK_SCHEDULER`` ``scheduler``         ``tcp://HOST:8786`` or ``tls://HOST:8786``
``HEADROOM_DASK_TLS_CA``    ``tls_ca_file``       CA certificate (PEM) the scheduler's must chain to
``HEADROOM_DASK_TLS_CERT``  ``tls_client_cert``   this client's certificate (PEM)
``HEADROOM_DASK_TLS_KEY``   ``tls_client_key``    its private key (PEM; may be inside the cert file)
==========================  ====================  ===========================================

With a CA set, encryption is required (``require_encryption``): a ``tcp://`` address is refused.

A connection is bounded in time as a whole: Dask's own ``Client(timeout=...)`` bounds only the
TCP connect, and a peer that accepts and never answers its handshake hung the caller for over
200 s; :func:`connect_client` first completes one handshake under a deadline, without
deserializing anything the peer sends.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass

#: Environment variable naming the Dask scheduler (``tcp://HOST:8786``) sweeps run on.
ENV_SCHEDULER = "HEADROOM_DASK_SCHEDULER"
#: Environment variables of the TLS files, by :class:`Cluster` field.
ENV_TLS = {"tls_ca_file": "HEADROOM_DASK_TLS_CA", "tls_client_cert": "HEADROOM_DASK_TLS_CERT",
           "tls_client_key": "HEADROOM_DASK_TLS_KEY"}
#: Seconds a whole connection (TCP connect and handshake) may take.
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Cluster:
    """A Dask scheduler the operator configured.

    Attributes
    ----------
    address : ``tcp://HOST:PORT`` or ``tls://HOST:PORT``
    tls_ca_file, tls_client_cert, tls_client_key : paths of PEM files, or None (plain TCP)
    source : where the address came from (``--cluster``, ``$HEADROOM_DASK_SCHEDULER``,
        ``secrets.toml [dask]``), shown by the app and in error messages
    """

    address: str
    tls_ca_file: str | None = None
    tls_client_cert: str | None = None
    tls_client_key: str | None = None
    source: str = "--cluster"

    def __str__(self) -> str:  # what SweepResult.backend and the pages show
        return self.address

    @property
    def tls(self) -> bool:
        """Whether the connection is encrypted and authenticated with TLS."""
        return self.tls_ca_file is not None

    def security(self):
        """The :class:`distributed.security.Security` of this cluster (empty for plain TCP).

        Raises
        ------
        ValueError
            A ``tls://`` address without a CA file, or a TLS file that does not exist.
        """
        from distributed.security import Security

        if self.address.startswith("tls://") and not self.tls:
            raise ValueError(f"{self.address} is a TLS address but no CA file is set: set "
                             f"{ENV_TLS['tls_ca_file']} (and {ENV_TLS['tls_client_cert']}, "
                             f"{ENV_TLS['tls_client_key']}) or [dask] tls_ca_file in secrets.toml")
        if not self.tls:
            return Security()
        for name in ENV_TLS:
            path = getattr(self, name)
            if path is not None and not os.path.isfile(path):
                raise ValueError(f"Dask TLS file {name} = {path} does not exist ({self.source})")
        return Security(tls_ca_file=self.tls_ca_file, tls_client_cert=self.tls_client_cert,
                        tls_client_key=self.tls_client_key, require_encryption=True)


def _clean(value) -> str | None:
    text = str(value).strip() if value is not None else ""
    return text or None


def operator_cluster(cli_value: str | None = None,
                     secrets: Mapping | None = None) -> Cluster | None:
    """The operator's cluster: ``cli_value`` (``--cluster``), else ``$HEADROOM_DASK_SCHEDULER``,
    else ``secrets["scheduler"]`` (the app's ``[dask]`` table); None when none is set (sweeps
    run locally). TLS files come from the environment, else ``secrets``. ``"local"`` and
    ``"serial"`` given as ``cli_value`` return None (the caller passes them on as backends).
    """
    secrets = secrets or {}
    if _clean(cli_value) in ("local", "serial"):
        return None
    found = [(address, source) for value, source in
             ((cli_value, "--cluster"), (os.environ.get(ENV_SCHEDULER), f"${ENV_SCHEDULER}"),
              (secrets.get("scheduler"), "secrets.toml [dask]"))
             if (address := _clean(value)) is not None]
    if not found:
        return None
    address, source = found[0]
    tls = {name: _clean(os.environ.get(env)) or _clean(secrets.get(name))
           for name, env in ENV_TLS.items()}
    return Cluster(address, source=source, **tls)


def as_cluster(backend) -> Cluster:
    """``backend`` (a :class:`Cluster`, or an address string: TLS files from the environment)
    as a :class:`Cluster`."""
    if isinstance(backend, Cluster):
        return backend
    tls = {name: _clean(os.environ.get(env)) for name, env in ENV_TLS.items()}
    return Cluster(str(backend).strip(), source="--cluster", **tls)


def _unreachable(cluster: Cluster, why: str) -> ValueError:
    return ValueError(f"no Dask scheduler answered at {cluster.address} ({cluster.source}): "
                      f"{why}; start one with `dask scheduler` and a worker with `dask worker "
                      f"{cluster.address}`, or unset --cluster / {ENV_SCHEDULER} to run locally")


def handshake(cluster: Cluster, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Open one comm to the scheduler and complete Dask's handshake within ``timeout_s`` in all
    (connect, TLS, the peer's handshake reply), deserializing nothing the peer sends; then close.

    Raises
    ------
    ValueError
        Nothing answered, the handshake did not finish within ``timeout_s``, or TLS failed.
    """
    from distributed.comm import connect

    security = cluster.security()

    async def probe() -> None:
        comm = await asyncio.wait_for(
            connect(cluster.address, timeout=timeout_s, deserialize=False,
                    **security.get_connection_args("client")), timeout_s)
        await comm.close()

    try:
        asyncio.run(asyncio.wait_for(probe(), timeout_s))
    except TimeoutError as exc:
        raise _unreachable(cluster, f"no handshake within {timeout_s:g} s") from exc
    except (OSError, ValueError, TypeError, RuntimeError) as exc:
        raise _unreachable(cluster, f"{type(exc).__name__}: {exc}") from exc


def connect_client(backend, timeout_s: float = CONNECT_TIMEOUT_S):
    """A ``distributed.Client`` on the operator's scheduler (not the default client), reached
    within ``timeout_s`` (:func:`handshake` first, then the client).

    Parameters
    ----------
    backend : :class:`Cluster` or an address (``tcp://HOST:8786``; TLS files from the
        environment)

    Raises
    ------
    ValueError
        No scheduler answered within ``timeout_s``, TLS is misconfigured (the message says how
        to start one or what to set).
    """
    from distributed import Client

    cluster = as_cluster(backend)
    handshake(cluster, timeout_s)
    try:
        return Client(cluster.address, timeout=f"{timeout_s}s", set_as_default=False,
                      security=cluster.security())
    except (OSError, TimeoutError) as exc:
        raise _unreachable(cluster, str(exc)) from exc
