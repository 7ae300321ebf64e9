"""UFM (and NetQ) credentials: basic user/password, an access token or a client certificate.

Read from a private file or the environment — never argv — and never echoed in any message:
a secret is kept out of ``repr``, a file readable by group or others is refused, and every
error names the file and the key, not the value. Surrounding whitespace is stripped (a token
read with ``$(cat token.txt)`` from a CRLF file ends in CR); a control character inside a
value is refused, because it would end up in an HTTP header (where http.client raises with
the header, secret included, in its message) or split an error line.
"""

from __future__ import annotations

import base64
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from topograph_slurm.errors import AuthError


@dataclass(frozen=True, slots=True)
class Appliance:
    """A fabric appliance with a REST API (UFM, NetQ): its name in messages and the stem of
    its flags, config keys and environment variables (``--ufm-credentials``, ``UFM_TOKEN``),
    so one credentials reader and one HTTP client serve every such source."""

    name: str
    stem: str
    #: what a 404 hints at (appended to the error line)
    missing: str = ""

    def env_keys(self) -> dict[str, str]:
        """Environment variable → credentials field (``UFM_USERNAME`` → ``username``)."""
        fields = ("username", "password", "token", "client_cert", "client_key")
        return {f"{self.stem.upper()}_{name.upper()}": name for name in fields}


UFM = Appliance("UFM", "ufm", ": is this UFM >= 6?")
NETQ = Appliance("NetQ", "netq")
NMX = Appliance("NMX", "nmx")
#: The environment variables credentials are read from. ``collect``'s srun and ssh children
#: never get them: srun exports its whole environment to every task on every node.
CREDENTIAL_ENV_VARS: tuple[str, ...] = (*UFM.env_keys(), *NETQ.env_keys(), *NMX.env_keys())

#: How a control character is named in an error (the value itself is never shown).
_CONTROL_NAMES = {"\0": "NUL", "\t": "TAB", "\n": "LF", "\r": "CR", "\x1b": "ESC", "\x7f": "DEL"}
_FILE_KEYS = {
    "username": "username",
    "user": "username",
    "password": "password",
    "token": "token",
    "access_token": "token",
    "client_cert": "client_cert",
    "cert": "client_cert",
    "client_key": "client_key",
    "key": "client_key",
}


@dataclass(frozen=True, slots=True)
class UfmCredentials:
    """One way to authenticate to UFM. Secrets are excluded from ``repr`` so that a traceback
    or a debug print can never show them."""

    username: str = ""
    password: str = field(default="", repr=False)
    token: str = field(default="", repr=False)
    client_cert: Path | None = None
    client_key: Path | None = None
    origin: str = ""  # where they came from (a path or "environment"), for error messages
    appliance: Appliance = UFM

    def __post_init__(self) -> None:
        """Refuse what HTTP cannot carry, here, so that no way of building credentials can
        hand http.client a header it rejects with the secret in its message."""
        fields = {
            "username": self.username,
            "password": self.password,
            "token": self.token,
            "client certificate path": str(self.client_cert or ""),
            "client key path": str(self.client_key or ""),
        }
        for name, value in fields.items():
            _refuse_control_characters(name, value, self.origin, self.appliance)
        where = f"{self.appliance.name} credentials from {self.origin or 'the caller'}"
        if ":" in self.username:
            raise AuthError(f"{where}: the username contains ':', which basic auth cannot carry")
        if not self.token.isascii():
            raise AuthError(f"{where}: the token contains non-ASCII characters")

    @property
    def kind(self) -> str:
        """``basic``, ``token`` or ``cert``."""
        if self.token:
            return "token"
        if self.client_cert is not None:
            return "cert"
        return "basic"

    @property
    def prefix(self) -> str:
        """The REST prefix this authentication method is served under."""
        return "/ufmRestV3" if self.kind == "token" else "/ufmRest"

    def headers(self) -> dict[str, str]:
        """HTTP headers carrying the credentials (none for a client certificate)."""
        if self.kind == "token":
            return {"Authorization": f"Basic {self.token}"}
        if self.kind == "basic":
            raw = f"{self.username}:{self.password}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode("ascii")}
        return {}

    def secrets(self) -> tuple[str, ...]:
        """Every secret string, so callers (and tests) can check no message contains one."""
        return tuple(s for s in (self.password, self.token) if s)


def load_credentials(
    path: Path | None, env: Mapping[str, str], appliance: Appliance = UFM
) -> UfmCredentials:
    """Credentials from *path* (YAML mapping or ``key=value`` lines) or, without a path, from
    ``UFM_USERNAME``/``UFM_PASSWORD``, ``UFM_TOKEN`` or ``UFM_CLIENT_CERT``/``UFM_CLIENT_KEY``.

    A file readable by group or others is refused: a password in a 0644 file is a leaked
    password. Every error is one AuthError line that names the file and the key, never a value.
    """
    if path is not None:
        values = _read_credentials_file(path, appliance.name)
        origin = str(path)
    else:
        keys = appliance.env_keys()
        stripped = {keys[k]: v.strip() for k, v in env.items() if k in keys}
        values = {k: v for k, v in stripped.items() if v}
        origin = "environment"
        if not values:
            e = appliance.stem.upper()
            raise AuthError(
                f"no {appliance.name} credentials: give --{appliance.stem}-credentials FILE or "
                f"set {e}_USERNAME and {e}_PASSWORD, {e}_TOKEN, or {e}_CLIENT_CERT (and "
                f"{e}_CLIENT_KEY)"
            )
    base = path.parent if path is not None else None
    return _credentials_from(values, origin, base, appliance)


def _refuse_control_characters(name: str, value: str, origin: str, appliance: Appliance) -> None:
    """One AuthError naming the field and the character, never the value."""
    bad = next((ch for ch in value if unicodedata.category(ch) == "Cc"), None)
    if bad is not None:
        char = _CONTROL_NAMES.get(bad, f"U+{ord(bad):04X}")
        raise AuthError(
            f"{appliance.name} credentials from {origin or 'the caller'}: the {name} contains a "
            "control "
            f"character ({char}); remove it (surrounding whitespace is stripped, not this)"
        )


def _check_private(path: Path, what: str) -> None:
    try:
        mode = path.stat().st_mode
    except OSError as err:
        raise AuthError(f"cannot read {what} {path}: {err.strerror}") from None
    if mode & 0o077:
        raise AuthError(
            f"{what} {path} is readable by group or others (mode {mode & 0o777:04o}); "
            f"run: chmod 600 {path}"
        )


def _read_credentials_file(path: Path, name: str) -> dict[str, str]:
    _check_private(path, f"{name} credentials file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise AuthError(f"cannot read {name} credentials file {path}: {reason}") from None
    return _parse_credentials_text(text, path, name)


def _parse_credentials_text(text: str, path: Path, name: str) -> dict[str, str]:
    """YAML mapping, else ``key=value`` lines; YAML errors are reported by line only, because
    PyYAML's own message quotes the offending text (which may be the password)."""
    data: object = None
    if not re.search(r"^\s*[A-Za-z_]+\s*=", text, re.MULTILINE):
        try:  # BaseLoader: every scalar stays a string (a password 0123 is not octal 83)
            data = yaml.load(text, Loader=yaml.BaseLoader)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise AuthError(f"{name} credentials file {path}: invalid YAML{where}") from None
    if isinstance(data, dict):
        raw = {str(k): "" if v is None else str(v) for k, v in data.items()}
    elif data is None or isinstance(data, str):
        raw = _key_value_lines(text, path, name)
    else:
        raise AuthError(f"{name} credentials file {path}: expected a mapping of keys to values")
    values: dict[str, str] = {}
    for key, value in raw.items():
        canonical = _FILE_KEYS.get(key.strip().lower())
        if canonical is None:
            known = ", ".join(sorted(set(_FILE_KEYS)))
            raise AuthError(f"{name} credentials file {path}: unknown key {key!r} (known: {known})")
        if value.strip():
            values[canonical] = value.strip()
    return values


def _key_value_lines(text: str, path: Path, name: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        if not sep:
            raise AuthError(f"{name} credentials file {path}:{lineno}: expected key=value")
        out[key.strip()] = value.strip().strip("'\"")
    return out


def _credentials_from(
    values: dict[str, str], origin: str, base: Path | None, appliance: Appliance
) -> UfmCredentials:
    where = f"{appliance.name} credentials from {origin}"
    kinds = [
        k
        for k, present in (
            ("username/password", "username" in values or "password" in values),
            ("token", "token" in values),
            ("client certificate", "client_cert" in values or "client_key" in values),
        )
        if present
    ]
    if len(kinds) != 1:
        what = " and ".join(kinds) if kinds else "nothing usable"
        raise AuthError(f"{where}: give exactly one method, found {what}")
    if kinds[0] == "username/password":
        if not values.get("username") or not values.get("password"):
            raise AuthError(f"{where}: username and password both needed")
        return UfmCredentials(
            values["username"], values["password"], origin=origin, appliance=appliance
        )
    if kinds[0] == "token":
        return UfmCredentials(token=values["token"], origin=origin, appliance=appliance)
    return _cert_credentials(values, origin, base, appliance)


def _cert_credentials(
    values: dict[str, str], origin: str, base: Path | None, appliance: Appliance
) -> UfmCredentials:
    if "client_cert" not in values:
        raise AuthError(
            f"{appliance.name} credentials from {origin}: client_key given without client_cert"
        )

    def resolve(text: str) -> Path:
        p = Path(text).expanduser()
        return p if p.is_absolute() or base is None else base / p

    key = values.get("client_key")
    creds = UfmCredentials(
        client_cert=resolve(values["client_cert"]),
        client_key=resolve(key) if key else None,
        origin=origin,
        appliance=appliance,
    )  # checked (no control characters) before a path appears in any message
    if not creds.client_cert or not creds.client_cert.is_file():
        raise AuthError(f"{appliance.name} client certificate {creds.client_cert} not found")
    if creds.client_key is not None:
        _check_private(creds.client_key, f"{appliance.name} client key")
    return creds
