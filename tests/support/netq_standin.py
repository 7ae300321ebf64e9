"""A NetQ stand-in for tests: a real HTTPS server on 127.0.0.1 (the UFM stand-in's server and
certificates) answering NetQ's login, premises selection and topology-graph requests, the
graph being a real recorded answer replayed byte for byte.

It checks what NetQ checks: the login body's username and password, and on every later
request the bearer token it handed out for that step. ``fault`` misbehaves on purpose.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

LOGIN_TOKEN, PREMISES_TOKEN = "login-tok-5d1f", "opid-tok-9a2e"


@dataclass
class NetqState:
    """What the server answers: the graph bytes, the account, the premises, a fault."""

    graph: bytes
    username: str
    password: str
    premises: list[dict[str, Any]] = field(
        default_factory=lambda: [
            {"opid": 7, "name": "lab", "namespace": "ns", "config_key_viewed": True},
            {"opid": 8, "name": "empty", "namespace": "ns", "config_key_viewed": False},
        ]
    )
    fault: str | None = None  # "401" at login, "500" on the graph, "token" (no usable token)
    requests: list[tuple[str, str, bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class NetqHandler(BaseHTTPRequestHandler):
    """NetQ's three requests; anything else is a 404."""

    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: pytest output is for failures."""

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def _note(self, body: bytes) -> NetqState:
        st: NetqState = self.server.state
        with st.lock:
            st.requests.append((self.command, self.path, body))
        return st

    def do_POST(self) -> None:
        st = self._note(body := self._body())
        if self.path == "/api/netq/auth/v1/login":
            return self._login(st, body)
        path, _, query = self.path.partition("?")
        if path != "/api/netq/telemetry/v1/object/topologygraph/fetch-topology":
            return self._send(404, b'{"error": "not found"}')
        if self.headers.get("Authorization") != f"Bearer {PREMISES_TOKEN}" or query != (
            "timestamp=0"
        ):
            return self._send(401, b"Unauthorized")
        if st.fault == "500":
            return self._send(500, b"Internal Server Error")
        return self._send(200, st.graph)

    def do_GET(self) -> None:
        st = self._note(b"")
        if not self.path.startswith("/api/netq/auth/v1/select/opid/"):
            return self._send(404, b'{"error": "not found"}')
        if self.headers.get("Authorization") != f"Bearer {LOGIN_TOKEN}":
            return self._send(401, b"Unauthorized")
        token = "bad token\r\nX: y" if st.fault == "token" else PREMISES_TOKEN
        return self._send(200, json.dumps({"access_token": token, "premises": []}).encode())

    def _login(self, st: NetqState, body: bytes) -> None:
        try:
            asked = json.loads(body)
        except ValueError:
            return self._send(400, b"bad request")
        if st.fault == "401" or asked != {"username": st.username, "password": st.password}:
            return self._send(401, b'{"message": "invalid credentials"}')
        answer = {"access_token": LOGIN_TOKEN, "premises": st.premises}
        return self._send(200, json.dumps(answer).encode())

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
