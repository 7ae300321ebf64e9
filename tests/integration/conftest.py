"""Fixtures for integration tests against real Slurm (24.11 and 26.05) in Docker.

Every test here is marked ``integration``. When Docker cannot be reached the tests skip with the
reason, except under ``CI=true``, where they fail: a CI run that skipped the real-Slurm tests
would pass while proving nothing.

Fixtures:

- ``slurm_version``: parametrises a test over ``"24.11"`` and ``"26.05"`` (session scope, so each
  image is built or reused once per session).
- ``slurm_image``: the built test image for ``slurm_version``.
- ``make_cluster(spec, wait=True)``: starts a ``harness.Cluster`` and waits until all nodes are
  idle; every cluster is torn down after the test, and a failed test's report carries the
  slurmctld and slurmd logs.
- ``make_module_cluster``: the same for a cluster the tests of one module share (a cluster
  start is the costliest step of a test; tests that only read its state should share one).
- ``validate(nodes, topology_conf=..., topology_yaml=..., ...)``: ``harness.validate_topology``
  bound to the version and image (slurmctld alone, no slurmd per node).
- ``host_env``: the environment for topograph-slurm run on the host: ``topograph-slurm`` there
  is the installed wheel's (``installed_tool``, tests/conftest.py), not the checkout.
- ``shims(cluster, "scontrol", ..., **options)``: ``harness.Cluster.shims`` writing to the
  test's tmp_path; returns ``host_env`` with those commands first on PATH.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pytest

HARNESS_DIR = Path(__file__).resolve().parents[2] / "slurm-test-cluster"
if str(HARNESS_DIR) not in sys.path:
    sys.path.insert(0, str(HARNESS_DIR))

import harness  # noqa: E402  (lives in slurm-test-cluster/, not in the package)

import tests.conftest as tests_conftest  # noqa: E402
from tests.product.artifact import Artifact  # noqa: E402

SLURM_VERSIONS = tuple(harness.VERSIONS)
HERE = Path(__file__).resolve().parent


def unavailable(reason: str) -> NoReturn:
    tests_conftest.unavailable("the Slurm test cluster", reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/integration, so ``-m 'not integration'`` excludes them."""
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the daemon logs of the test's clusters (its own and its module's) to a failed
    test's report."""
    report = yield
    clusters = [c for node in item.listchain() for c in getattr(node, "_slurm_clusters", [])]
    if report.failed and report.when == "call":
        for cluster in clusters:
            if not cluster._torn_down:
                nodes = list(cluster.nodes)[:3]
                report.sections.append(
                    (f"slurm logs ({cluster.prefix})", cluster.logs_text(*nodes, tail=200))
                )
    return report


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    try:
        client = harness.docker_client()
    except harness.HarnessError as exc:
        unavailable(str(exc))
    harness.sweep_leftovers(client)
    yield client
    harness.sweep_leftovers(client)


@pytest.fixture(scope="session", params=SLURM_VERSIONS)
def slurm_version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


_IMAGES: dict[str, str] = {}


def image_for(version: str, client: Any) -> str:
    """Build or reuse the image for ``version`` once per session (a build error fails)."""
    if version not in _IMAGES:
        _IMAGES[version] = harness.ensure_image(version, client)
    return _IMAGES[version]


@pytest.fixture(scope="session")
def slurm_image(docker_client: Any, slurm_version: str) -> str:
    return image_for(slurm_version, docker_client)


MakeCluster = Callable[..., harness.Cluster]


def cluster_starter(
    request: pytest.FixtureRequest, docker_client: Any, slurm_image: str
) -> Iterator[MakeCluster]:
    """``start(spec, wait=True, timeout=120)`` for the clusters of one pytest node (a test or a
    module): each is listed on the node for the failure report and torn down after it. A
    ``ClusterSpec(tool=True)`` gets the session's wheel (``installed_tool``), built only then."""
    clusters: list[harness.Cluster] = []
    request.node._slurm_clusters = clusters

    def start(
        spec: harness.ClusterSpec, wait: bool = True, timeout: float = 120
    ) -> harness.Cluster:
        wheel = request.getfixturevalue("installed_tool").wheel if spec.tool else None
        cluster = harness.Cluster(spec, slurm_image, client=docker_client, tool_wheel=wheel)
        clusters.append(cluster)
        cluster.start()
        if wait:
            cluster.wait_idle(timeout=timeout)
        return cluster

    yield start
    for cluster in clusters:
        cluster.teardown()


@pytest.fixture
def make_cluster(
    request: pytest.FixtureRequest, docker_client: Any, slurm_image: str
) -> Iterator[MakeCluster]:
    yield from cluster_starter(request, docker_client, slurm_image)


@pytest.fixture(scope="module")
def make_module_cluster(
    request: pytest.FixtureRequest, docker_client: Any, slurm_image: str
) -> Iterator[MakeCluster]:
    """``make_cluster`` for a cluster the tests of one module share (per Slurm version)."""
    yield from cluster_starter(request, docker_client, slurm_image)


Validate = Callable[..., harness.ValidationResult]


@pytest.fixture
def validate(docker_client: Any, slurm_version: str, slurm_image: str) -> Validate:
    def run(nodes: Sequence[str], **kwargs: Any) -> harness.ValidationResult:
        return harness.validate_topology(
            slurm_version, nodes, image=slurm_image, client=docker_client, **kwargs
        )

    return run


@pytest.fixture
def host_env(installed_tool: Artifact) -> dict[str, str]:
    """This process's environment for topograph-slurm on the host, the shipped one: the
    installed wheel's venv first on PATH, no PYTHONPATH (so ``topograph-slurm`` run with it is
    the artifact, not the checkout), and without the ``SLURM_*`` variables of a job pytest
    itself may run in (they would point the tool at that job)."""
    return installed_tool.env()


Shims = Callable[..., dict[str, str]]


@pytest.fixture
def shims(tmp_path: Path, host_env: dict[str, str]) -> Shims:
    """``shims(cluster, *commands, **options)``: the commands as the controller's real ones
    (``harness.Cluster.shims``, options ``env``, ``copy_in``, ``copy_out``) in
    ``tmp_path/shims``; returns ``host_env`` with them first on PATH."""

    def make(cluster: harness.Cluster, *commands: str, **options: Any) -> dict[str, str]:
        return cluster.shims(tmp_path / "shims", commands, environ=host_env, **options)

    return make
