"""A hostile Dask "scheduler" for the trust tests (issue 34, item 1): it listens with Dask's
own comm layer and puts in its handshake (the first message every connection reads) and in its
first reply a pickled object whose unpickling creates a marker file in the connecting process.
It logs each connection it serves.

Run: ``python tests/fake_scheduler.py MARKER LOG [--silent]``; prints its address on the
first line of stdout. ``--silent`` accepts TCP connections and never answers (a peer that hung
a session for over 200 s behind Dask's own 3 s connect timeout).
"""

from __future__ import annotations

import asyncio
import socket
import sys


class _Payload:
    """Unpickling this opens (creates) the marker file: code run by the connecting process."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _log(path: str, text: str) -> None:
    with open(path, "a") as fh:
        fh.write(text + "\n")


async def _hostile(marker: str, log: str) -> None:
    from distributed.comm import listen
    from distributed.comm.core import Comm
    from distributed.protocol.serialize import to_serialize

    plain_info = Comm.handshake_info

    def handshake_info(self):  # the listener's handshake carries the payload too
        return {**plain_info(self), "payload": to_serialize(_Payload(marker))}

    Comm.handshake_info = handshake_info

    async def handle(comm) -> None:
        _log(log, "connection")
        try:
            await comm.write({"op": "handshake", "payload": to_serialize(_Payload(marker))})
            await comm.read()
        except Exception:  # noqa: BLE001 - the client hangs up: nothing to do
            pass

    listener = listen("tcp://127.0.0.1:0", handle, deserialize=False)
    await listener.start()
    print(listener.contact_address, flush=True)  # noqa: T201 - the address, for the test
    await asyncio.Event().wait()


def _silent(log: str) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    print(f"tcp://127.0.0.1:{server.getsockname()[1]}", flush=True)  # noqa: T201
    held = []
    while True:
        conn, _ = server.accept()
        held.append(conn)  # never read, never answered, never closed
        _log(log, "connection")


if __name__ == "__main__":
    if "--silent" in sys.argv:
        _silent(sys.argv[2])
    else:
        asyncio.run(_hostile(sys.argv[1], sys.argv[2]))
