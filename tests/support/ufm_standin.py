"""A UFM stand-in for tests: a real HTTPS server on 127.0.0.1 serving UFM-shaped JSON.

The UFM source must build the same Fabric as the ibnetdiscover parser, so the stand-in renders
any :class:`Fabric` (a simulated one, or a real dump parsed by the ibnetdiscover parser) the way
UFM's REST API reports it — systems, ports, links, unhealthy ports — and serves it over TLS with
a certificate made for the test, checking basic/token/client-certificate authentication like UFM
does. Fault modes (401, 403, 404, 500-then-success, slow, invalid JSON, truncated body, wrong
schema, a body or a status line trickled byte by byte, a huge body with or without its length)
exercise every error path of the client through a real socket.

Where UFM's exact representation is unknown (SHARP aggregation nodes, switches without a
``MF0;`` description) the stand-in picks a plausible one and the source handles both.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import re
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from topograph_slurm.model.fabric import Fabric, Link

_MF0 = re.compile(r"MF0;([^:\s;]+):(.+)/U1")
_WORDS = re.compile(r"^(\S+)\s+\S+$")

# --------------------------------------------------------------------------------------------
# Certificates


@dataclass(frozen=True)
class Pki:
    """PEM files of a test CA, a server certificate for 127.0.0.1, a client certificate, and
    an unrelated CA (to provoke verification failures)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, cn: str, server: bool
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return key, builder.sign(ca_key, hashes.SHA256())


def make_pki(directory: Path) -> Pki:
    """Generate the test PKI under *directory* (EC keys: fast)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca("topograph-slurm test CA")
    _, other = _ca("some other CA")
    server_key, server_cert = _leaf(ca_key, ca_cert, "127.0.0.1", server=True)
    client_key, client_cert = _leaf(ca_key, ca_cert, "ufm-client", server=False)
    pem = serialization.Encoding.PEM
    pki = Pki(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        other_ca=directory / "other-ca.pem",
    )
    pki.ca.write_bytes(ca_cert.public_bytes(pem))
    pki.other_ca.write_bytes(other.public_bytes(pem))
    pki.server_cert.write_bytes(server_cert.public_bytes(pem))
    pki.client_cert.write_bytes(client_cert.public_bytes(pem))
    _write_key(server_key, pki.server_key)
    _write_key(client_key, pki.client_key)
    return pki


# --------------------------------------------------------------------------------------------
# Fabric -> UFM JSON


def _switch_identity(guid: str, description: str) -> tuple[str, str]:
    """(system_name, model) as UFM splits a switch's ``MF0;<name>:<model>/U1`` description;
    other descriptions become the name verbatim without a model, an empty one the GUID."""
    m = _MF0.fullmatch(description)
    if m:
        return m.group(1), m.group(2)
    return (description or guid), ""


def _host_of(description: str) -> str:
    """Host a CA belongs to, for grouping HCAs into one UFM host system."""
    m = _WORDS.match(description)
    if m and "mellanox" not in description.lower():
        return m.group(1)
    return description


def _speed(link: Link) -> str:
    return "N/A" if link.speed.strip("?") == "" else link.speed


def _width(link: Link) -> str:
    return "N/A" if link.width.strip("?") == "" else link.width


def ufm_json_from_fabric(
    fabric: Fabric, unhealthy: list[tuple[str, int]] | None = None
) -> dict[str, Any]:
    """The UFM REST view of *fabric*: ``{"systems": [...], "ports": [...], "links": [...],
    "unhealthy_ports": [...]}``. *unhealthy* lists (guid, port) pairs UFM marks unhealthy."""
    names = {g: _switch_identity(g, s.description) for g, s in fabric.switches.items()}
    hosts: dict[str, list[str]] = {}
    for guid in sorted(fabric.cas):
        hosts.setdefault(_host_of(fabric.cas[guid].description) or guid, []).append(guid)
    host_system = {g: (min(gs), host) for host, gs in hosts.items() for g in gs}

    def port_desc(guid: str, port: int) -> str:
        if guid in fabric.switches:
            return f"{names[guid][0]}:{port}"
        return fabric.cas[guid].description

    ports: dict[tuple[str, int], dict[str, Any]] = {}

    def port_record(guid: str, port: int) -> dict[str, Any]:
        if guid in fabric.switches:
            sw = fabric.switches[guid]
            system, system_name, kind, lid = guid, names[guid][0], "Switch IB Port", sw.lid
        else:
            (system, system_name), kind, lid = host_system[guid], "Computer IB Port", None
        return {
            "guid": guid,
            "name": f"{guid}_{port}",
            "number": port,
            "external_number": port,
            "dname": str(port) if kind.startswith("Switch") else f"HCA-1/{port}",
            "description": kind,
            "node_description": port_desc(guid, port),
            "systemID": system,
            "system_name": system_name,
            "lid": lid or 0,
            "logical_state": "Down",
            "physical_state": "Disabled",
            "active_speed": "N/A",
            "active_width": "N/A",
            "severity": "Info",
            "peer": "N/A",
        }

    links = []
    for link in fabric.links:
        ends = (
            (link.a_guid, link.a_port, link.b_guid, link.b_port),
            (link.b_guid, link.b_port, link.a_guid, link.a_port),
        )
        for guid, port, peer, peer_port in ends:
            rec = ports.setdefault((guid, port), port_record(guid, port))
            rec.update(
                logical_state="Active",
                physical_state="LinkUp",
                active_speed=_speed(link),
                active_width=_width(link),
                peer=f"{peer}_{peer_port}",
                peer_guid=peer,
                peer_node_description=port_desc(peer, peer_port),
            )
        links.append(
            {
                "source_guid": link.a_guid,
                "source_port": str(link.a_port),
                "destination_guid": link.b_guid,
                "destination_port": str(link.b_port),
                "source_port_dname": str(link.a_port),
                "destination_port_dname": str(link.b_port),
                "source_port_name": f"{link.a_guid}_{link.a_port}",
                "destination_port_name": f"{link.b_guid}_{link.b_port}",
                "width": _width(link),
                "severity": "Info",
                "source_port_node_description": port_desc(link.a_guid, link.a_port),
                "destination_port_node_description": port_desc(link.b_guid, link.b_port),
                "name": f"{link.a_guid}_{link.a_port}:{link.b_guid}_{link.b_port}",
                "capabilities": [],
            }
        )
    linked = {g for g, _ in ports}
    for guid in fabric.cas:  # unlinked HCAs still show one (down) port in UFM
        if guid not in linked:
            ports[(guid, 1)] = port_record(guid, 1)
    systems = _systems(fabric, names, hosts, ports)
    return {
        "systems": systems,
        "ports": [ports[k] for k in sorted(ports)],
        "links": links,
        "unhealthy_ports": [_unhealthy(fabric, g, p, ports) for g, p in unhealthy or []],
    }


def _systems(
    fabric: Fabric,
    names: dict[str, tuple[str, str]],
    hosts: dict[str, list[str]],
    ports: dict[tuple[str, int], dict[str, Any]],
) -> list[dict[str, Any]]:
    by_system: dict[str, list[str]] = {}
    for (_, _), rec in sorted(ports.items()):
        by_system.setdefault(rec["systemID"], []).append(rec["name"])
    out = []
    for guid in sorted(fabric.switches):
        name, model = names[guid]
        out.append(
            {
                "system_guid": guid,
                "guid": guid,
                "name": guid,
                "type": "switch",
                "system_name": name,
                "model": model,
                "description": model,
                "vendor": "Mellanox",
                "role": "tor",
                "state": "active",
                "severity": "Info",
                "ports": by_system.get(guid, []),
            }
        )
    for host, guids in sorted(hosts.items()):
        system = min(guids)
        out.append(
            {
                "system_guid": system,
                "guid": system,
                "name": system,
                "type": "host",
                "system_name": host,
                "model": "Computer",
                "description": "server",
                "vendor": "Mellanox",
                "role": "endpoint",
                "state": "active",
                "severity": "Info",
                "ports": by_system.get(system, []),
            }
        )
    return out


def _unhealthy(
    fabric: Fabric, guid: str, port: int, ports: dict[tuple[str, int], dict[str, Any]]
) -> dict[str, Any]:
    rec = ports.get((guid, port), {})
    peer_name = str(rec.get("peer", "N/A"))
    peer, _, peer_port = peer_name.rpartition("_")
    return {
        "UnhealthyGUID": guid,
        "UnhealthyPortNumber": port,
        "UnhealthyNode": rec.get("node_description", guid),
        "UnhealthyPort": f"{rec.get('system_name', guid)}/{port}",
        "UnhealthyPortDname": str(port),
        "PeerGUID": peer,
        "PeerNode": peer,
        "PeerPortNumber": int(peer_port) if peer_port.isdigit() else 0,
        "State": "Warning",
        "Condition": ["HIGH_BER"],
        "StatusTime": "Mon Nov 30 04:00:00 2026",
    }


# --------------------------------------------------------------------------------------------
# The HTTPS server

FAULTS = (
    None,
    "401",
    "403",
    "404",
    "500-then-ok",
    "500",
    "slow",
    "invalid-json",
    "truncated",
    "wrong-schema",
    "missing-fields",
    "trickle",  # headers at once, then one body byte every `delay` seconds
    "trickle-head",  # the status line itself, one byte every `delay` seconds
    "huge",  # `size` bytes of body, with Content-Length
    "huge-stream",  # `size` bytes of body, no Content-Length: the end is the connection closing
)
_ROUTES = {
    "resources/systems": "systems",
    "resources/ports": "ports",
    "resources/links": "links",
    "app/unhealthy_ports": "unhealthy_ports",
}


@dataclass
class StandinState:
    """What the server serves and how it misbehaves; tests flip ``fault`` between requests."""

    data: dict[str, Any]
    username: str = ""
    password: str = ""
    token: str = ""
    cert_auth: bool = False
    fault: str | None = None
    failures: int = 2  # how many 500s "500-then-ok" sends before succeeding
    delay: float = 2.0  # seconds "slow" waits before answering; "trickle*": between bytes
    size: int = 4 << 20  # bytes of body the "huge*" modes send
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: StandinState

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hang up mid-response on purpose (timeouts, truncation, bad certificates)."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: pytest output is for failures."""

    def do_GET(self) -> None:
        st = self.server.state
        with st.lock:
            st.requests.append((self.path, dict(self.headers.items())))
        prefix, _, rest = self.path.lstrip("/").partition("/")
        endpoint = _ROUTES.get(rest.split("?")[0])
        if prefix not in ("ufmRest", "ufmRestV3") or endpoint is None:
            return self._send(404, b'{"error": "not found"}')
        if not self._authorised(prefix):
            return self._send(401, b"Unauthorized")
        if self._fault(endpoint):
            return None
        body = json.dumps(st.data[endpoint], indent=1).encode()
        return self._send(200, body)

    def _authorised(self, prefix: str) -> bool:
        st = self.server.state
        header = self.headers.get("Authorization", "")
        if prefix == "ufmRestV3":
            return bool(st.token) and header == f"Basic {st.token}"
        if st.cert_auth and self.connection.getpeercert():
            return True
        if st.username:
            raw = f"{st.username}:{st.password}".encode()
            return header == "Basic " + base64.b64encode(raw).decode()
        return False

    def _fault(self, endpoint: str) -> bool:
        """Misbehave as configured; True when the response has been sent."""
        st = self.server.state
        fault = st.fault
        if fault in ("401", "403"):
            self._send(int(fault), b"denied")
        elif fault == "404" and endpoint == "links":
            self._send(404, b"Not Found")
        elif fault == "500" or (fault == "500-then-ok" and self._count_failure()):
            self._send(500, b"Internal Server Error")
        elif fault == "slow":
            time.sleep(st.delay)
            return False
        elif fault == "invalid-json" and endpoint == "links":
            self._send(200, b'[{"source_guid": "0x1",, }')
        elif fault == "truncated" and endpoint == "ports":
            body = json.dumps(st.data[endpoint]).encode()
            self._send(200, body[: len(body) // 2], length=len(body))
            self.close_connection = True
        elif fault == "wrong-schema" and endpoint == "systems":
            self._send(200, b'{"systems": "not a list"}')
        elif fault == "missing-fields" and endpoint == "links":
            self._send(200, b'[{"src": "0x1", "dst": "0x2"}]')
        elif fault in ("trickle", "trickle-head", "huge", "huge-stream"):
            self._stream(fault, st)
        else:
            return False
        return True

    def _stream(self, fault: str, st: StandinState) -> None:
        """Bodies the client must cut off: endless trickles and oversized answers. Writing
        stops when the client hangs up (BrokenPipe ends the handler quietly)."""
        self.close_connection = True
        if fault == "trickle-head":
            return self._trickle(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]", st.delay)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if fault != "huge-stream":
            self.send_header("Content-Length", str(st.size if fault == "huge" else 1 << 20))
        self.end_headers()
        self.wfile.flush()
        if fault == "trickle":
            return self._trickle(b"[" + b" " * (1 << 20), st.delay)
        chunk = b" " * (1 << 16)
        for start in range(0, st.size, len(chunk)):
            self.wfile.write(chunk[: st.size - start])
        return None

    def _trickle(self, data: bytes, delay: float) -> None:
        for i in range(len(data)):
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()
            time.sleep(delay)

    def _count_failure(self) -> bool:
        st = self.server.state
        with st.lock:
            if st.failures > 0:
                st.failures -= 1
                return True
        return False

    def _send(self, code: int, body: bytes, length: int | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


@dataclass
class Standin:
    """A running stand-in: its base URL and the state tests poke."""

    url: str
    state: Any


@contextmanager
def serve(
    pki: Pki,
    state: Any,
    tls: bool = True,
    handler: type[BaseHTTPRequestHandler] = _Handler,
) -> Iterator[Standin]:
    """Run the stand-in on an ephemeral 127.0.0.1 port for the duration of the block
    (``tls=False``: plain http, for the client's unencrypted-URL warning); *handler* answers
    (UFM's, or another appliance's such as tests/support/netq_standin.py) from *state*."""
    server = _Server(("127.0.0.1", 0), handler)
    server.state = state
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(pki.server_cert), str(pki.server_key))
        ctx.load_verify_locations(str(pki.ca))
        ctx.verify_mode = ssl.CERT_OPTIONAL
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        scheme = "https" if tls else "http"
        yield Standin(f"{scheme}://127.0.0.1:{server.server_address[1]}", state)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
