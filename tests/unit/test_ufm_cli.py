"""``generate --ufm`` and ``collect --ufm`` end to end through click, against the HTTPS stand-in.

The contract: for one fabric ``generate --ufm`` prints the same topology.conf as
``generate --ibnetdiscover``; every failure is one ``topograph-slurm: error:`` line with its exit
code, writes nothing, and never shows a credential. Tests skip (with the reason) until the CLI
has the options, so they switch on by themselves when the flags are wired.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.support.ufm_standin import (
    Pki,
    Standin,
    StandinState,
    make_pki,
    serve,
    ufm_json_from_fabric,
)
from topograph_slurm.cli.main import main
from topograph_slurm.errors import Exit
from topograph_slurm.sources import sim
from topograph_slurm.sources.ibnetdiscover import parse_ibnetdiscover

USER, PASSWORD, TOKEN = "ufmadmin", "pa55-w0rd-XYZZY", "tok-3f9a7c1e5b2d4680aa"
SPEC = "nodes=16,rails=2,su=8"


def _options(name: str) -> set[str]:
    command = main.commands.get(name) if isinstance(main, click.Group) else None
    if command is None:
        return set()
    return {opt for param in command.params for opt in getattr(param, "opts", [])}


def _needs(command: str, *options: str) -> pytest.MarkDecorator:
    """Skip (decided at import, before any fixture runs) until *command* has *options*."""
    missing = [o for o in options if o not in _options(command)]
    reason = f"`{command}` has no {', '.join(missing)} yet (the lead wires the CLI)"
    return pytest.mark.skipif(bool(missing), reason=reason)


GENERATE = _needs("generate", "--ufm", "--ufm-credentials", "--ufm-ca-bundle", "--ufm-timeout")
LIMITS = _needs("generate", "--ufm", "--ufm-deadline", "--ufm-max-response-mib")
INSECURE = _needs("generate", "--ufm", "--ufm-credentials", "--ufm-insecure")
COLLECT = _needs("collect", "--ufm", "--ufm-credentials", "--ufm-ca-bundle", "--out-dir")
SNAPSHOT = _needs("generate", "--snapshot")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dump") / "fabric.txt"
    path.write_text(sim.generate_ibnetdiscover(sim.parse_sim_spec(SPEC)), encoding="utf-8")
    return path


@pytest.fixture
def standin(pki: Pki, dump: Path) -> Iterator[Standin]:
    fabric = parse_ibnetdiscover(dump.read_text(encoding="utf-8"), str(dump))
    state = StandinState(
        ufm_json_from_fabric(fabric), username=USER, password=PASSWORD, token=TOKEN
    )
    with serve(pki, state) as running:
        yield running


@pytest.fixture
def creds(tmp_path: Path) -> Path:
    path = tmp_path / "ufm.yaml"
    path.write_text(f"username: {USER}\npassword: {PASSWORD}\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def _run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    base_env = {"UFM_USERNAME": "", "UFM_PASSWORD": "", "UFM_TOKEN": ""}
    base_env.update(env or {})
    result = CliRunner().invoke(
        main, ["--config", os.devnull, *args], env=base_env, catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


def _clean(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text and TOKEN not in text


def _ufm_args(standin: Standin, pki: Pki, creds: Path | None) -> list[str]:
    args = ["--ufm", standin.url, "--ufm-ca-bundle", str(pki.ca), "--ufm-timeout", "5"]
    return args + (["--ufm-credentials", str(creds)] if creds else [])


@GENERATE
@pytest.mark.parametrize("fmt", ["tree", "block"])
def test_generate_ufm_equals_generate_ibnetdiscover(
    standin: Standin, pki: Pki, creds: Path, dump: Path, fmt: str
) -> None:
    code, via_ufm, err = _run(["generate", *_ufm_args(standin, pki, creds), "--format", fmt])
    assert code == 0, err
    code, via_dump, err2 = _run(["generate", "--ibnetdiscover", str(dump), "--format", fmt])
    assert code == 0, err2
    assert via_ufm == via_dump
    assert ("SwitchName=" if fmt == "tree" else "BlockName=") in via_ufm
    _clean(via_ufm, err)


@GENERATE
def test_generate_ufm_with_token_from_the_environment(standin: Standin, pki: Pki) -> None:
    code, out, err = _run(["generate", *_ufm_args(standin, pki, None)], env={"UFM_TOKEN": TOKEN})
    assert code == 0, err
    assert all(path.startswith("/ufmRestV3/") for path, _ in standin.state.requests)
    _clean(out, err)


@GENERATE
@pytest.mark.parametrize(
    ("fault", "code", "text"),
    [
        ("401", Exit.AUTH, "HTTP 401"),
        ("403", Exit.AUTH, "HTTP 403"),
        ("404", Exit.COLLECT, "(404): is this UFM"),
        ("500", Exit.COLLECT, "HTTP 500"),
        ("invalid-json", Exit.INPUT, "invalid JSON"),
        ("truncated", Exit.INPUT, "truncated"),
        ("wrong-schema", Exit.INPUT, "expected a JSON list"),
    ],
)
def test_generate_ufm_fault_writes_nothing(
    standin: Standin, pki: Pki, creds: Path, tmp_path: Path, fault: str, code: int, text: str
) -> None:
    standin.state.fault = fault
    out_file = tmp_path / "topology.conf"
    rc, out, err = _run(["generate", *_ufm_args(standin, pki, creds), "-o", str(out_file)])
    assert rc == code, err
    assert text in err
    assert err.startswith("topograph-slurm: error:") and err.count("\n") == 1
    assert not out_file.exists()
    _clean(out, err)


@GENERATE
def test_generate_ufm_wrong_certificate(
    standin: Standin, pki: Pki, creds: Path, tmp_path: Path
) -> None:
    out_file = tmp_path / "topology.conf"
    args = ["--ufm", standin.url, "--ufm-credentials", str(creds), "--ufm-ca-bundle"]
    rc, out, err = _run(["generate", *args, str(pki.other_ca), "-o", str(out_file)])
    assert rc == Exit.COLLECT
    assert "TLS certificate verification failed" in err
    assert not out_file.exists()
    _clean(out, err)


def _one_error_line(rc: int, code: int, err: str, text: str) -> None:
    assert rc == code, err
    assert err.startswith("topograph-slurm: error:") and err.count("\n") == 1, err
    assert text in err, err


@LIMITS
@pytest.mark.parametrize("fault", ["trickle", "trickle-head"])
def test_generate_ufm_stops_at_the_deadline(
    standin: Standin, pki: Pki, creds: Path, tmp_path: Path, fault: str
) -> None:
    """The issue's cron hang: a byte every 0.5 s never trips the 5 s per-request timeout."""
    standin.state.fault, standin.state.delay = fault, 0.5
    out_file = tmp_path / "topology.conf"
    args = [*_ufm_args(standin, pki, creds), "--ufm-deadline", "2", "-o", str(out_file)]
    start = time.monotonic()
    rc, out, err = _run(["generate", *args])
    elapsed = time.monotonic() - start
    assert elapsed < 2 + 1.0, elapsed
    _one_error_line(rc, Exit.COLLECT, err, "no complete answer within the 2s deadline")
    assert not out_file.exists() and out == ""
    _clean(out, err)


@LIMITS
@pytest.mark.parametrize("fault", ["huge", "huge-stream"])
def test_generate_ufm_refuses_a_body_over_the_cap(
    standin: Standin, pki: Pki, creds: Path, tmp_path: Path, fault: str
) -> None:
    standin.state.fault, standin.state.size = fault, 3 << 20
    out_file = tmp_path / "topology.conf"
    args = [*_ufm_args(standin, pki, creds), "--ufm-max-response-mib", "1", "-o", str(out_file)]
    rc, out, err = _run(["generate", *args])
    _one_error_line(rc, Exit.COLLECT, err, "/ufmRest/resources/systems ")
    assert out == ""
    assert "the 1 MiB limit per response (--ufm-max-response-mib" in err
    assert not out_file.exists()


@GENERATE
@pytest.mark.parametrize("verbose", [[], ["-v"]])
def test_a_token_read_from_a_crlf_file_works(
    standin: Standin, pki: Pki, verbose: list[str]
) -> None:
    """``export UFM_TOKEN=$(cat token.txt)`` of a CRLF file: the CR is stripped, not sent."""
    args = [*verbose, "generate", *_ufm_args(standin, pki, None)]
    code, out, err = _run(args, env={"UFM_TOKEN": TOKEN + "\r"})
    assert code == 0, err
    assert "SwitchName=" in out
    _clean(out, err)


@GENERATE
@pytest.mark.parametrize("verbose", [[], ["-v"]])
@pytest.mark.parametrize("char", ["\r", "\n", "\x1b"])
@pytest.mark.parametrize("variable", ["UFM_TOKEN", "UFM_PASSWORD"])
def test_a_control_character_inside_a_secret_is_exit_8_and_never_shown(
    standin: Standin, pki: Pki, verbose: list[str], char: str, variable: str
) -> None:
    """Exit 8 with one line; with ``-v`` the traceback follows it, and shows no value either
    (the error is raised ``from None`` and tracebacks print source lines, not variables).
    NUL cannot be in an environment variable at all (execve); the file case covers it."""
    secret = TOKEN if variable == "UFM_TOKEN" else PASSWORD
    half = len(secret) // 2
    env = {variable: secret[:half] + char + secret[half:]}
    if variable == "UFM_PASSWORD":
        env["UFM_USERNAME"] = USER
    code, out, err = _run([*verbose, "generate", *_ufm_args(standin, pki, None)], env=env)
    assert code == Exit.AUTH, err
    lines = [line for line in err.splitlines() if line.startswith("topograph-slurm: error:")]
    field = "token" if variable == "UFM_TOKEN" else "password"
    name = {"\r": "CR", "\n": "LF", "\x1b": "ESC"}[char]
    assert lines == [
        f"topograph-slurm: error: UFM credentials from environment: the {field} contains a "
        f"control character ({name}); remove it (surrounding whitespace is stripped, not this)"
    ]
    assert ("Traceback" in err) == bool(verbose)
    if not verbose:
        assert err.count("\n") == 1
    for text in (out, err):
        assert secret[:half] not in text and secret[half:] not in text
    assert not standin.state.requests


@GENERATE
@pytest.mark.parametrize("char", ["\0", "\x1b", "\r"])
def test_a_control_character_in_a_credentials_file_is_exit_8(
    standin: Standin, pki: Pki, tmp_path: Path, char: str
) -> None:
    path = tmp_path / "ufm.cred"
    path.write_text(f"username={USER}\npassword=pa55{char}-w0rd-XYZZY\n", encoding="utf-8")
    path.chmod(0o600)
    code, out, err = _run(["-v", "generate", *_ufm_args(standin, pki, path)])
    assert code == Exit.AUTH, err
    assert "pa55" not in err and "w0rd-XYZZY" not in err and "pa55" not in out


@GENERATE
def test_a_control_character_in_the_url_is_one_line(creds: Path) -> None:
    rc, out, err = _run(
        ["generate", "--ufm", "https://ufm\x1b[2J.example", "--ufm-credentials", str(creds)]
    )
    assert out == ""
    _one_error_line(rc, Exit.INPUT, err, "the UFM URL contains a space, a control")


@INSECURE
def test_generate_ufm_insecure_warns_and_works(standin: Standin, creds: Path) -> None:
    args = ["--ufm", standin.url, "--ufm-credentials", str(creds), "--ufm-insecure"]
    rc, out, err = _run(["generate", *args])
    assert rc == 0, err
    assert "SwitchName=" in out
    assert "verification" in err and "OFF" in err


@GENERATE
def test_generate_ufm_refuses_a_readable_credentials_file(
    standin: Standin, pki: Pki, creds: Path, tmp_path: Path
) -> None:
    creds.chmod(0o644)
    out_file = tmp_path / "topology.conf"
    rc, out, err = _run(["generate", *_ufm_args(standin, pki, creds), "-o", str(out_file)])
    assert rc == Exit.AUTH
    assert "chmod 600" in err
    assert not standin.state.requests, "nothing may be sent with unsafely stored credentials"
    assert not out_file.exists()
    _clean(out, err)


@GENERATE
def test_connection_refused_exit_code(pki: Pki, creds: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rc, out, err = _run(
        ["generate", "--ufm", f"https://127.0.0.1:{port}", "--ufm-credentials", str(creds)]
    )
    assert rc == Exit.COLLECT
    assert "connection refused" in err
    _clean(out, err)


@COLLECT
@SNAPSHOT
def test_collect_ufm_then_generate_from_the_snapshot(
    standin: Standin, pki: Pki, creds: Path, dump: Path, tmp_path: Path
) -> None:
    snap = tmp_path / "snap"
    rc, _, err = _run(["collect", *_ufm_args(standin, pki, creds), "--out-dir", str(snap)])
    assert rc == 0, err
    assert sorted(p.name for p in (snap / "ufm").glob("*.json")) == [
        "links.json",
        "ports.json",
        "systems.json",
        "unhealthy_ports.json",
    ]
    for path in snap.rglob("*"):
        if path.is_file():
            _clean(path.read_text(encoding="utf-8", errors="replace"))
    rc, offline, err = _run(["generate", "--snapshot", str(snap)])
    assert rc == 0, err
    rc, via_dump, _ = _run(["generate", "--ibnetdiscover", str(dump)])
    assert offline == via_dump


@COLLECT
def test_collect_ufm_failure_keeps_no_snapshot(
    standin: Standin, pki: Pki, creds: Path, tmp_path: Path
) -> None:
    standin.state.fault = "401"
    snap = tmp_path / "snap"
    rc, out, err = _run(["collect", *_ufm_args(standin, pki, creds), "--out-dir", str(snap)])
    assert rc == Exit.AUTH
    assert not snap.exists()
    _clean(out, err)
