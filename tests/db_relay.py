"""A database outage a test can start and end: a TCP relay on a spare loopback port in front
of the suite's PostgreSQL. Cutting it is what clients see when the server stops or fails
over (every open connection dropped, new ones refused); restoring it listens on the same
port again, as the database coming back. The shared server itself is never stopped."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

from django.db import connections

from tests.catalog.worker_helpers import free_port


class DatabaseRelay:
    """Relay 127.0.0.1:``port`` to ``target`` (host, port) while up.

    Threads only: one accepting, two per relayed connection.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def restore(self) -> None:
        """Listen again (the database is back)."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and drop every open one (the database is gone)."""
        if self._listener is not None:
            with contextlib.suppress(OSError):  # wakes the accepting thread
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            dropped, self._open = self._open, set()
        for sock in dropped:
            _shut(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        _shut(sink)
        _shut(source)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextlib.contextmanager
def relayed(*aliases: str) -> Iterator[dict[str, DatabaseRelay]]:
    """Point each database alias of this process at a relay of its own (up at first) for
    the block; restore the settings and close the connections afterwards. Needs a
    transactional test: the test's connections are closed and reopened."""
    relays: dict[str, DatabaseRelay] = {}
    saved: dict[str, object] = {}
    try:
        for alias in aliases:
            config = connections[alias].settings_dict
            relay = DatabaseRelay((config["HOST"] or "127.0.0.1", int(config["PORT"] or 5432)))
            relay.restore()
            connections[alias].close()
            saved[alias] = config["PORT"]
            config["PORT"] = relay.port
            relays[alias] = relay
        yield relays
    finally:
        for alias, port in saved.items():
            connections[alias].close()
            connections[alias].settings_dict["PORT"] = port
        for relay in relays.values():
            relay.cut()
