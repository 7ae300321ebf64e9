"""The shipped artifact: the wheel and sdist built from this checkout, and the wheel installed
into a fresh virtualenv that has no checkout on its path, as a user installs it.

Why: the product that passed every test once was not the product a user got (issue 18: a hand
list of packages left four out of the wheel, while every test ran the checkout). Tests that run
the tool as shipped take the session fixture ``installed_tool`` (tests/conftest.py), an
:class:`Artifact`, and run ``installed_tool.exe`` with ``installed_tool.env()`` from a directory
outside the checkout.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Fixed zip timestamps (the wheel's default is the build time): the same source gives the
#: same wheel bytes, so the test cluster's image with the wheel installed is reused until the
#: code changes (slurm-test-cluster/harness.py keys it by the wheel's digest).
SOURCE_DATE_EPOCH = "315532800"
#: Variables that would let the installed tool see a checkout or another environment.
LEAKY = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH", "VIRTUAL_ENV")
#: The package name and where its templates live in the checkout (pyproject.toml package-dir).
PACKAGE = "topograph_slurm"
TEMPLATES = "templates"


@dataclass(frozen=True)
class Artifact:
    """A wheel, the sdist it was built from, and the venv the wheel is installed in."""

    wheel: Path
    sdist: Path
    venv: Path

    @property
    def exe(self) -> Path:
        """The installed console script, ``<venv>/bin/topograph-slurm``."""
        return self.venv / "bin" / "topograph-slurm"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """This process's environment without anything that points Python at a checkout or
        at a Slurm job pytest may run in, the venv's bin first on PATH, and ``extra``."""
        env = {k: v for k, v in os.environ.items() if k not in LEAKY and not k.startswith("SLURM_")}
        env["PATH"] = os.pathsep.join((str(self.venv / "bin"), env.get("PATH", os.defpath)))
        env["PYTHONNOUSERSITE"] = "1"
        return env | dict(extra or {})

    def run(
        self, args: Sequence[str], cwd: Path, extra: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``topograph-slurm ARGS`` as installed, from ``cwd`` (never the checkout)."""
        return self._run([str(self.exe), *args], cwd, extra)

    def python_run(self, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """The venv's Python running ``code``, from ``cwd``."""
        return self._run([str(self.python), "-c", code], cwd, None)

    def _run(
        self, argv: list[str], cwd: Path, extra: Mapping[str, str] | None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, cwd=cwd, env=self.env(extra), capture_output=True, text=True, timeout=300
        )


#: Opt-in, for quick local loops: a directory where the artifact of each source tree is kept
#: (by the digest of the files that go into it) and reused by later sessions. Never under CI.
CACHE_ENV = "TOPOGRAPH_ARTIFACT_CACHE"


def shipped(repo: Path, scratch: Path) -> Artifact:
    """The artifact of ``repo``: built and installed under ``scratch``, or, with
    $TOPOGRAPH_ARTIFACT_CACHE set (and not under CI), reused from there when the same sources
    were built before (one builder at a time per source digest)."""
    cache = os.environ.get(CACHE_ENV, "")
    if not cache or os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        return _build_and_install(repo, scratch)
    where = Path(cache) / source_digest(repo)
    where.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{where}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = where / "done"
        if not done.exists():
            shutil.rmtree(where, ignore_errors=True)
            _build_and_install(repo, where)
            done.touch()
    (wheel,) = (where / "dist").glob("*.whl")
    (sdist,) = (where / "dist").glob("*.tar.gz")
    return Artifact(wheel, sdist, where / "venv")


def _build_and_install(repo: Path, where: Path) -> Artifact:
    wheel, sdist = build(repo, where / "dist")
    return install(wheel, sdist, where / "venv")


def source_digest(repo: Path) -> str:
    """A digest of everything the sdist is made of (the package, the templates, the build
    config and the metadata's files) and of the Python the venv is made with."""
    files = [
        p
        for top in (PACKAGE, TEMPLATES)
        for p in (repo / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    files += [repo / name for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE")]
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted(files):
        digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def build(repo: Path, out: Path) -> tuple[Path, Path]:
    """``python -m build``: the sdist, then the wheel built from that sdist (so a file the
    sdist lacks is missing from the wheel too), in an isolated build environment as pip makes
    one for ``pip install .``. Returns (wheel, sdist)."""
    env = {k: v for k, v in os.environ.items() if k not in LEAKY}
    env["SOURCE_DATE_EPOCH"] = SOURCE_DATE_EPOCH
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(repo)], env, "build")
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return wheel, sdist


def install(wheel: Path, sdist: Path, where: Path) -> Artifact:
    """A fresh venv at ``where`` (no system site-packages) with ``wheel`` and its declared
    dependencies pip-installed from the package index, as README's install section does."""
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    artifact = Artifact(wheel, sdist, where)
    pip = [str(artifact.python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, str(wheel)], artifact.env(), "pip install")
    return artifact


def _run(argv: Sequence[str], env: Mapping[str, str], what: str) -> None:
    proc = subprocess.run(argv, env=dict(env), cwd="/", capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")


def checkout_packages(repo: Path) -> set[str]:
    """Every package of the checkout: each directory under the package holding a ``.py``
    file, and the templates package."""
    root = repo / PACKAGE
    found = {
        ".".join(p.parent.relative_to(repo).parts)
        for p in root.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    return found | {f"{PACKAGE}.{TEMPLATES}"}


def checkout_modules(repo: Path) -> list[str]:
    """Every module of the checkout's package, dotted, in a stable order."""
    files = (p for p in (repo / PACKAGE).rglob("*.py") if "__pycache__" not in p.parts)
    names = {".".join(p.relative_to(repo).with_suffix("").parts) for p in files}
    # __main__ runs the CLI when imported: the --help checks run it.
    return sorted(n.removesuffix(".__init__") for n in names if not n.endswith(".__main__"))


#: Run by the installed venv's Python: imports each module named on stdin, prints the failures.
IMPORT_EACH = """
import importlib, sys
for name in sys.stdin.read().split():
    try:
        importlib.import_module(name)
    except Exception as exc:
        print(f"{name}: {type(exc).__name__}: {exc}")
"""


def unimportable(installed: Artifact, repo: Path, cwd: Path) -> list[str]:
    """The checkout's modules that do not import from the installed artifact, with why: a
    module the wheel lacks, or one whose import needs something the wheel or its declared
    dependencies lack (``--help`` alone misses a command that imports its analysis lazily)."""
    done = subprocess.run(
        [str(installed.python), "-c", IMPORT_EACH],
        input="\n".join(checkout_modules(repo)),
        cwd=cwd,
        env=installed.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.stdout.splitlines() + ([done.stderr] if done.returncode else [])


def wheel_packages(wheel: Path) -> set[str]:
    """The packages a wheel holds: each directory of a file under the package."""
    with zipfile.ZipFile(wheel) as whl:
        names = [n for n in whl.namelist() if n.startswith(f"{PACKAGE}/")]
    return {".".join(Path(n).parent.parts) for n in names}


def missing_files(repo: Path, wheel: Path) -> list[str]:
    """Checkout files that the wheel lacks: the package's ``.py`` files and every template,
    by their path inside the installed package."""
    want = {
        str(p.relative_to(repo))
        for p in (repo / PACKAGE).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    want |= {f"{PACKAGE}/{TEMPLATES}/{p.name}" for p in (repo / TEMPLATES).iterdir() if p.is_file()}
    with zipfile.ZipFile(wheel) as whl:
        return sorted(want - set(whl.namelist()))


def without_package(wheel: Path, package: str, out: Path) -> Path:
    """A copy of ``wheel`` in ``out`` with ``package`` (dotted) and its subpackages dropped,
    as a hand-written package list drops one: for the test that the stage catches it."""
    prefix = package.replace(".", "/") + "/"
    out.mkdir(parents=True, exist_ok=True)
    target = out / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if not item.filename.startswith(prefix):
                data = src.read(item)
                if item.filename.endswith(".dist-info/RECORD"):
                    data = b"".join(
                        line
                        for line in data.splitlines(keepends=True)
                        if not line.startswith(prefix.encode())
                    )
                dst.writestr(item, data)
    return target
