"""An NMX stand-in for tests: a real HTTPS server on 127.0.0.1 (the UFM stand-in's server and
certificates) answering NMX's three reads: ``/nmx/v1/compute-nodes`` and, per domain,
``/nmx/v1/gpus?domain=`` and ``/nmx/v1/partitions?domain=``, replaying the bytes it is given.

It checks basic authentication on every request and refuses every method but GET (405), so
a test sees that the client only reads. ``fault`` misbehaves on purpose.
"""

from __future__ import annotations

import base64
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any


@dataclass
class NmxState:
    """What the server answers: compute nodes, and per domain the GPUs and partitions."""

    compute_nodes: bytes
    gpus: dict[str, bytes]
    partitions: dict[str, bytes]
    username: str
    password: str
    fault: str | None = None  # "500" on the partitions
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class NmxHandler(BaseHTTPRequestHandler):
    """NMX's reads; any other path is a 404, any other method a 405."""

    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: pytest output is for failures."""

    def _note(self) -> NmxState:
        st: NmxState = self.server.state
        with st.lock:
            st.requests.append((self.command, self.path))
        return st

    def do_GET(self) -> None:
        st = self._note()
        raw = f"{st.username}:{st.password}".encode()
        if self.headers.get("Authorization") != "Basic " + base64.b64encode(raw).decode():
            return self._send(401, b'{"message": "Unauthorized"}')
        path, _, query = self.path.partition("?")
        domain = urllib.parse.parse_qs(query).get("domain", [""])[0]
        if path == "/nmx/v1/compute-nodes":
            return self._send(200, st.compute_nodes)
        if path == "/nmx/v1/gpus":
            return self._send(200, st.gpus.get(domain, b"[]"))
        if path == "/nmx/v1/partitions":
            if st.fault == "500":
                return self._send(500, b"Internal Server Error")
            return self._send(200, st.partitions.get(domain, b"[]"))
        return self._send(404, b'{"error": "not found"}')

    def _refuse(self) -> None:
        self._note()
        self._send(405, b'{"error": "read only"}')

    do_POST = do_PUT = do_DELETE = _refuse

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
