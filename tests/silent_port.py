"""A TCP listener that accepts every connection and never sends a byte: a service that hangs.

The readiness checks (``erasure worker --check``, the console's ``/readyz``) must end within their deadline
against it. Test modules import ``silent_port_fixture``; tests ask for ``silent_port``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest


@pytest.fixture(name="silent_port")
def silent_port_fixture() -> Iterator[int]:
    """The port of a listener on 127.0.0.1 that accepts every connection and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _addr = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    for conn in held:
        conn.close()
    server.close()
