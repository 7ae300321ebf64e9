"""NVLink domain verdicts per node and grouping into domains.

Per-node inputs are written as nvidia-smi prints them (CSV query lines, ``-q`` Fabric
blocks) and go through the real parsers, so these tests exercise the path a collected
snapshot takes. Bulk racks come from the sim_gpu renderers, which print the same formats.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import real_fixture
from tests.support.sim_gpu import nvl_node_gpus, render_query_csv, render_query_q
from topograph_slurm.analysis.nvlink.clique import Finding, group_domains, node_domain
from topograph_slurm.model.findings import FindingKind
from topograph_slurm.model.gpu import ZERO_UUID, DomainKind, DomainResult, GpuFabric
from topograph_slurm.model.names import natural_key
from topograph_slurm.sources.nvidia_smi import parse_query_csv, parse_query_fabric

RACK_A = "5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10"
RACK_B = "a91b3c5d-2e4f-4061-8273-94a5b6c7d8e9"

# A healthy GB200 tray, exactly as the collector's CSV query prints it.
TRAY_CSV = """\
0, 1652924010001, 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10, 1, Completed, Success
1, 1652924010002, 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10, 1, Completed, Success
2, 1652924010003, 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10, 1, Completed, Success
3, 1652924010004, 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10, 1, Completed, Success
"""

# A tray whose GPUs landed in two cliques (a fabric-manager partition error).
SPLIT_CSV = """\
0, 1652924010011, 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10, 1, Completed, Success
1, 1652924010012, 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10, 1, Completed, Success
2, 1652924010013, 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10, 2, Completed, Success
3, 1652924010014, a91b3c5d-2e4f-4061-8273-94a5b6c7d8e9, 1, Completed, Success
"""

# Fabric manager still working: nvidia-smi prints N/A ids while registration runs.
IN_PROGRESS_CSV = """\
0, 1652924010021, N/A, N/A, In Progress, N/A
1, 1652924010022, N/A, N/A, In Progress, N/A
2, 1652924010023, N/A, N/A, In Progress, N/A
3, 1652924010024, N/A, N/A, In Progress, N/A
"""

# PCIe / NVLink-bridge GPUs: no fabric at all.
NO_FABRIC_CSV = """\
0, 1320222043305, N/A, N/A, N/A, N/A
1, 1321022027867, N/A, N/A, N/A, N/A
"""

# One GPU fell out of the fabric while its tray-mates registered.
PARTIAL_CSV = """\
0, 1652924010031, 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10, 1, Completed, Success
1, 1652924010032, 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10, 1, Completed, Success
2, 1652924010033, 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10, 1, Completed, Success
3, [N/A], N/A, N/A, N/A, N/A
"""

# ``nvidia-smi -q`` Fabric blocks (driver R570 layout) of a tray with one unhealthy GPU.
UNHEALTHY_Q = """\
GPU 00000008:01:00.0
    Serial Number                         : 1652924010041
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 1
        ClusterUUID                       : 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10
        Health
            Summary                       : Healthy
            Bandwidth                     : Full
GPU 00000009:01:00.0
    Serial Number                         : 1652924010042
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 1
        ClusterUUID                       : 5f8e1c2a-7b3d-4e9f-a1c6-0d2e4b6a8c10
        Health
            Summary                       : Unhealthy
            Bandwidth                     : Degraded
"""


def _kinds(findings: tuple[Finding, ...] | list[Finding]) -> list[str]:
    return [f.kind for f in findings]


def _rack(uuid: str, clique: int, first: int, count: int = 18) -> dict[str, DomainResult]:
    """An NVL72 rack: *count* trays of 4 GPUs, each tray's CSV printed and parsed back."""
    out: dict[str, DomainResult] = {}
    for n in range(first, first + count):
        node = f"gb{n}"
        gpus = nvl_node_gpus(uuid, clique, serial_base=1_650_000_000_000 + 10 * n)
        out[node] = node_domain(parse_query_csv(render_query_csv(gpus)), node)
    return out


# --------------------------------------------------------------------------- node_domain


def test_healthy_tray_is_multi_node_domain() -> None:
    result = node_domain(parse_query_csv(TRAY_CSV), "gb1")
    assert result.kind is DomainKind.MULTI_NODE
    assert result.domain_id == f"{RACK_A}.1"
    assert (result.cluster_uuid, result.clique_id, result.gpu_count) == (RACK_A, 1, 4)
    assert result.findings == ()
    assert result.ok


def test_disagreeing_gpus_are_a_finding_not_an_exception() -> None:
    result = node_domain(parse_query_csv(SPLIT_CSV), "gb7")
    assert result.kind is DomainKind.INVALID
    assert result.domain_id is None
    assert result.cluster_uuid is None  # no single answer to keep
    [finding] = result.findings
    assert finding.kind == FindingKind.FABRIC_DISAGREE
    assert finding.subject == "gb7"
    assert f"GPU 0-1 in {RACK_A}.1" in finding.message
    assert f"GPU 2 in {RACK_A}.2" in finding.message
    assert f"GPU 3 in {RACK_B}.1" in finding.message


def test_in_progress_is_not_completed() -> None:
    result = node_domain(parse_query_csv(IN_PROGRESS_CSV), "gb3")
    assert result.kind is DomainKind.INVALID
    assert _kinds(result.findings) == [FindingKind.FABRIC_NOT_COMPLETED]
    assert "GPU 0-3 fabric State is 'In Progress'" in result.findings[0].message


def test_fabric_na_everywhere_is_no_domain() -> None:
    result = node_domain(parse_query_csv(NO_FABRIC_CSV), "a100-1")
    assert result.kind is DomainKind.NONE
    assert result.gpu_count == 2
    assert _kinds(result.findings) == [FindingKind.FABRIC_NA]
    assert "State N/A" in result.findings[0].message
    assert not result.ok


def test_partial_fabric_na() -> None:
    result = node_domain(parse_query_csv(PARTIAL_CSV), "gb9")
    assert result.kind is DomainKind.INVALID
    assert _kinds(result.findings) == [FindingKind.FABRIC_PARTIAL]
    assert result.findings[0].message.startswith("GPU 3 report fabric State N/A")
    assert result.cluster_uuid == RACK_A and result.clique_id == 1  # rack still known


def test_unhealthy_gpu_from_q_output() -> None:
    result = node_domain(parse_query_fabric(UNHEALTHY_Q), "gb5")
    assert result.kind is DomainKind.INVALID
    [finding] = result.findings
    assert finding.kind == FindingKind.FABRIC_UNHEALTHY
    assert "GPU 1" in finding.message
    assert "'Unhealthy'" in finding.message and "'Degraded'" in finding.message


def test_degraded_bandwidth_alone_is_unhealthy() -> None:
    gpus = nvl_node_gpus(RACK_A, 1, health=None, bandwidth="Degraded")
    assert _kinds(node_domain(gpus).findings) == [FindingKind.FABRIC_UNHEALTHY] * 4


def test_route_unhealthy_flag_is_unhealthy() -> None:
    text = UNHEALTHY_Q.replace(
        "Unhealthy\n            Bandwidth                     : Degraded",
        "Healthy\n            Bandwidth                     : Full\n"
        "            Route Unhealthy               : True",
    )
    result = node_domain(parse_query_fabric(text), "gb6")
    [finding] = result.findings
    assert finding.kind == FindingKind.FABRIC_UNHEALTHY
    assert "route unhealthy: True" in finding.message


def test_status_not_success() -> None:
    gpus = nvl_node_gpus(RACK_A, 1, status="Insufficient Resources")
    result = node_domain(gpus, "gb2")
    assert _kinds(result.findings) == [FindingKind.FABRIC_STATUS]
    assert "'Insufficient Resources'" in result.findings[0].message


def test_completed_without_ids() -> None:
    text = "0, 1652924010051, N/A, N/A, Completed, Success\n"
    result = node_domain(parse_query_csv(text), "gb4")
    assert _kinds(result.findings) == [FindingKind.FABRIC_MISSING_ID]


def test_zero_uuid_is_single_node_nvswitch() -> None:
    text = "".join(
        f"{i}, 165442300159{i}, 00000000-0000-0000-0000-000000000000, 0, Completed, Success\n"
        for i in range(8)
    )
    result = node_domain(parse_query_csv(text), "hgx1")
    assert result.kind is DomainKind.SINGLE_NODE
    assert result.domain_id is None
    assert result.cluster_uuid == ZERO_UUID
    assert result.ok


def test_no_gpus() -> None:
    result = node_domain([], "cpu1")
    assert result.kind is DomainKind.NONE
    assert _kinds(result.findings) == [FindingKind.NO_GPUS]


def test_several_problems_are_all_reported() -> None:
    gpus = [
        *nvl_node_gpus(RACK_A, 1, count=2),
        GpuFabric(2, state="In Progress"),
        GpuFabric(
            3,
            state="Completed",
            status="Success",
            clique_id=1,
            cluster_uuid=RACK_A,
            health="Unhealthy",
        ),
    ]
    result = node_domain(gpus, "gb8")
    assert _kinds(result.findings) == [
        FindingKind.FABRIC_NOT_COMPLETED,
        FindingKind.FABRIC_UNHEALTHY,
    ]


# --------------------------------------------------------------------------- real captures


def test_real_h100_hgx_is_single_node() -> None:
    path = real_fixture("nvidia-smi-q/h100-sxm-8gpu-hgx-q-fabric-completed.txt")
    result = node_domain(parse_query_fabric(path.read_text()), "hgx")
    assert result.kind is DomainKind.SINGLE_NODE and result.gpu_count == 8 and result.ok


def test_real_a100_is_fabric_na() -> None:
    path = real_fixture("nvidia-smi-q/a100-sxm-4gpu-q-fabric-na.txt")
    result = node_domain(parse_query_fabric(path.read_text()), "a100")
    assert result.kind is DomainKind.NONE
    assert _kinds(result.findings) == [FindingKind.FABRIC_NA]


def test_real_azure_insufficient_resources() -> None:
    path = real_fixture("nvidia-smi-q/azure-nvlink-fabric-insufficient-resources.txt")
    result = node_domain(parse_query_fabric(path.read_text()), "miv50")
    assert result.kind is DomainKind.INVALID
    assert result.cluster_uuid == ZERO_UUID
    assert _kinds(result.findings) == [FindingKind.FABRIC_STATUS]
    assert "Insufficient Resources" in result.findings[0].message


def test_real_gb200_unhealthy_clique2() -> None:
    path = real_fixture("nvidia-smi-q/gb200-fabric-grep-unhealthy-clique2.txt")
    result = node_domain(parse_query_fabric(path.read_text()), "gb200")
    assert result.kind is DomainKind.INVALID
    assert result.domain_id is None
    assert (result.cluster_uuid, result.clique_id) == ("dc6e40c4-d722-4357-9ba6-5291dd461278", 2)
    assert _kinds(result.findings) == [FindingKind.FABRIC_UNHEALTHY]


# --------------------------------------------------------------------------- group_domains


def test_two_nvl72_racks_group_into_two_domains() -> None:
    per_node = {**_rack(RACK_A, 1, first=1), **_rack(RACK_B, 1, first=19)}
    domains, findings = group_domains(per_node)
    assert list(domains) == [f"{RACK_A}.1", f"{RACK_B}.1"]
    assert domains[f"{RACK_A}.1"] == [f"gb{n}" for n in range(1, 19)]  # gb2 before gb10
    assert domains[f"{RACK_B}.1"] == [f"gb{n}" for n in range(19, 37)]
    assert findings == []


def test_one_rack_two_cliques() -> None:
    """NVLink partitions: one ClusterUUID, two CliqueIds → two domains."""
    per_node = {**_rack(RACK_A, 1, first=1, count=9), **_rack(RACK_A, 2, first=10, count=9)}
    domains, _ = group_domains(per_node)
    assert {d: len(n) for d, n in domains.items()} == {f"{RACK_A}.1": 9, f"{RACK_A}.2": 9}


def test_bad_nodes_are_left_out_and_reported() -> None:
    per_node = _rack(RACK_A, 1, first=1, count=4)
    per_node["gb5"] = node_domain(parse_query_csv(SPLIT_CSV))  # no node name given here
    per_node["gb6"] = node_domain(parse_query_csv(IN_PROGRESS_CSV), "gb6")
    per_node["gb7"] = node_domain(parse_query_fabric(UNHEALTHY_Q), "gb7")
    per_node["gb8"] = node_domain(parse_query_csv(PARTIAL_CSV), "gb8")
    per_node["a100-1"] = node_domain(parse_query_csv(NO_FABRIC_CSV), "a100-1")
    domains, findings = group_domains(per_node)
    assert domains == {f"{RACK_A}.1": ["gb1", "gb2", "gb3", "gb4"]}
    assert [(f.subject, f.kind) for f in findings] == [
        ("a100-1", FindingKind.FABRIC_NA),
        ("gb5", FindingKind.FABRIC_DISAGREE),  # node stamped from the dict key
        ("gb6", FindingKind.FABRIC_NOT_COMPLETED),
        ("gb7", FindingKind.FABRIC_UNHEALTHY),
        ("gb8", FindingKind.FABRIC_PARTIAL),
    ]
    assert all(f.is_problem for f in findings)


def test_single_node_systems_are_reported_as_info() -> None:
    hgx = nvl_node_gpus(ZERO_UUID, 0, count=8, health=None, bandwidth=None)
    per_node = {"hgx2": node_domain(hgx), "hgx10": node_domain(hgx), **_rack(RACK_A, 1, 1, 2)}
    domains, findings = group_domains(per_node)
    assert domains == {f"{RACK_A}.1": ["gb1", "gb2"]}
    assert [(f.subject, f.kind) for f in findings] == [
        ("hgx2", FindingKind.SINGLE_NODE_NVSWITCH),
        ("hgx10", FindingKind.SINGLE_NODE_NVSWITCH),
    ]
    assert not any(f.is_problem for f in findings)


def test_tray_with_missing_gpu_is_flagged() -> None:
    per_node = _rack(RACK_A, 1, first=1, count=4)
    per_node["gb3"] = node_domain(nvl_node_gpus(RACK_A, 1, count=3), "gb3")
    domains, findings = group_domains(per_node)
    assert domains[f"{RACK_A}.1"] == ["gb1", "gb2", "gb3", "gb4"]  # still in its rack
    [finding] = findings
    assert (finding.subject, finding.kind) == ("gb3", FindingKind.GPU_COUNT_MISMATCH)
    assert "3 GPUs" in finding.message and "usually have 4" in finding.message


def test_grouping_is_independent_of_input_order() -> None:
    per_node = {**_rack(RACK_B, 3, first=1, count=6), **_rack(RACK_A, 1, first=7, count=6)}
    per_node["gb99"] = node_domain(parse_query_csv(SPLIT_CSV), "gb99")
    expected = group_domains(per_node)
    items = list(per_node.items())
    random.Random(4).shuffle(items)
    assert group_domains(dict(items)) == expected


def test_rack_through_q_output() -> None:
    """The same rack collected with ``nvidia-smi -q`` instead of the CSV query."""
    per_node = {
        f"gb{n}": node_domain(parse_query_fabric(render_query_q(nvl_node_gpus(RACK_A, 5))))
        for n in range(1, 5)
    }
    domains, findings = group_domains(per_node)
    assert domains == {f"{RACK_A}.5": ["gb1", "gb2", "gb3", "gb4"]} and findings == []


def test_natural_key() -> None:
    names = ["n10", "n2", "n1", "rack2-n1", "n02"]
    assert sorted(names, key=natural_key) == ["n1", "n02", "n2", "n10", "rack2-n1"]


# --------------------------------------------------------------------------- fuzzing

_words = st.sampled_from([None, "Completed", "In Progress", "Not Started", "Success", "Healthy"])
_gpu = st.builds(
    GpuFabric,
    index=st.integers(0, 7),
    state=_words,
    status=_words,
    clique_id=st.one_of(st.none(), st.integers(0, 3)),
    cluster_uuid=st.sampled_from([None, ZERO_UUID, RACK_A, RACK_B]),
    health=st.sampled_from([None, "Healthy", "Unhealthy"]),
    health_bandwidth=st.sampled_from([None, "Full", "Degraded"]),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.lists(_gpu, max_size=5)))
def test_domain_logic_never_raises(nodes: dict[str, list[GpuFabric]]) -> None:
    per_node = {name: node_domain(gpus, name) for name, gpus in nodes.items()}
    domains, findings = group_domains(per_node)
    for name, result in per_node.items():
        in_domain = any(name in members for members in domains.values())
        assert in_domain == (result.kind is DomainKind.MULTI_NODE and result.ok)
        # a node outside every domain is always explained by a finding
        assert in_domain or any(f.subject == name for f in findings)


@pytest.mark.parametrize("state", ["Not Started", "Not Supported", "In Progress"])
def test_every_non_completed_state_is_a_finding(state: str) -> None:
    result = node_domain(nvl_node_gpus(RACK_A, 1, state=state), "gbx")
    assert result.kind is DomainKind.INVALID
    assert _kinds(result.findings) == [FindingKind.FABRIC_NOT_COMPLETED]


# --------------------------------------------------------------------------- ids only

# NVIDIA topograph's `--query-gpu=fabric.clusterUuid,fabric.cliqueId --format=csv,noheader`
TOPOGRAPH_TRAY = "".join(f"{RACK_A}, 7\n" for _ in range(4))


def test_ids_only_gives_the_domain_and_an_info_note() -> None:
    result = node_domain(parse_query_csv(TOPOGRAPH_TRAY), "gb1")
    assert result.kind is DomainKind.MULTI_NODE and result.domain_id == f"{RACK_A}.7"
    assert result.ok
    assert _kinds(result.findings) == [FindingKind.FABRIC_STATE_NOT_COLLECTED]
    assert not any(f.is_problem for f in result.findings)
    assert "State N/A" not in result.findings[0].message


def test_ids_only_rack_groups_and_reports_info_only() -> None:
    per_node = {f"gb{n}": node_domain(parse_query_csv(TOPOGRAPH_TRAY), f"gb{n}") for n in (1, 2)}
    domains, findings = group_domains(per_node)
    assert domains == {f"{RACK_A}.7": ["gb1", "gb2"]}
    assert [(f.subject, f.kind) for f in findings] == [
        ("gb1", FindingKind.FABRIC_STATE_NOT_COLLECTED),
        ("gb2", FindingKind.FABRIC_STATE_NOT_COLLECTED),
    ]
    assert not any(f.is_problem for f in findings)


@pytest.mark.parametrize(
    ("text", "kind", "words"),
    [
        ("N/A, N/A\nN/A, N/A\n", DomainKind.NONE, "(State not collected) on GPU 0-1"),
        (f"{RACK_A}, 7\nN/A, N/A\n", DomainKind.INVALID, "GPU 1 report ClusterUUID or CliqueId"),
        (f"{RACK_A}, 7\n{RACK_B}, 7\n", DomainKind.INVALID, "GPUs disagree"),
    ],
)
def test_ids_only_problems(text: str, kind: DomainKind, words: str) -> None:
    result = node_domain(parse_query_csv(text), "gb3")
    assert result.kind is kind and not result.ok
    problems = [f for f in result.findings if f.is_problem]
    assert len(problems) == 1 and words in problems[0].message
    assert "State N/A" not in problems[0].message


def test_ids_only_zero_uuid_is_single_node() -> None:
    result = node_domain(parse_query_csv(f"{ZERO_UUID}, 0\n" * 8), "hgx1")
    assert result.kind is DomainKind.SINGLE_NODE and result.ok
