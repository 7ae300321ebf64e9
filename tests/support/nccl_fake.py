"""A fake nccl-tests binary for tests: a POSIX shell script that prints a recorded real
nccl-tests output with its algbw/busbw columns scaled by a plan of planted faults.

No GPUs exist here, so this is the one stand-in of the ``bench`` tests: the launcher (real
``srun`` on the test cluster) and the parser, judge and recorder are the real ones. The
script learns its hosts from ``--nodelist=`` when it is the launcher itself (unit tests), else
from the step's node list through ``scontrol show hostnames`` (a task of a real srun step);
only rank 0 prints, as nccl-tests does. The scale table, one line per fault:

    node NODE FACTOR          every multi-node run with NODE is scaled by FACTOR
    uplink FACTOR NODE...     every run with some but not all hosts among NODE... (the
                              nodes behind one leaf's uplinks) is scaled by FACTOR
    hang NODE                 NODE's single-node run sleeps (a hung run)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: The capture replayed: a complete 2-node H100 run in the current layout (13 columns).
CAPTURE = "nccl-tests/h100-2node-16gpu-allreduce-root-wrong-layout-gcp-a3mega.txt"

_SCRIPT = r"""#!/bin/sh
hosts=""
for arg in "$@"; do
  case "$arg" in --nodelist=*) hosts=$(echo "${arg#--nodelist=}" | tr ',' ' ') ;; esac
done
if [ -z "$hosts" ]; then
  hosts=$(scontrol show hostnames "${SLURM_STEP_NODELIST:-$SLURM_NODELIST}" | tr '\n' ' ')
fi
[ "${SLURM_PROCID:-0}" = 0 ] || exit 0
count=$(echo $hosts | wc -w)
factor=1
while read -r kind first rest; do
  case "$kind" in
    hang)
      [ "$count" = 1 ] && [ "$hosts" = "$first " -o "$hosts" = "$first" ] && exec sleep 300 ;;
    node)
      for h in $hosts; do
        [ "$h" = "$first" ] && [ "$count" -gt 1 ] && factor=$(awk "BEGIN{print $factor*$rest}")
      done ;;
    uplink)
      behind=0
      for h in $hosts; do
        for b in $rest; do [ "$h" = "$b" ] && behind=$((behind + 1)); done
      done
      if [ "$behind" -gt 0 ] && [ "$behind" -lt "$count" ]; then
        factor=$(awk "BEGIN{print $factor*$first}")
      fi ;;
  esac
done <<'EOF_TABLE'
__TABLE__
EOF_TABLE
awk -v f="$factor" '
  $1 ~ /^[0-9]+$/ && NF == 13 {
    printf "%12s %13s %9s %7s %7s %8s %7.2f %7.2f %6s %8s %7.2f %7.2f %6s\n",
      $1, $2, $3, $4, $5, $6, $7 * f, $8 * f, $9, $10, $11 * f, $12 * f, $13
    next
  }
  { print }
' <<'EOF_CAPTURE'
__CAPTURE__
EOF_CAPTURE
"""


def scale_table(
    nodes: Mapping[str, float] = {},
    uplinks: Sequence[tuple[float, Sequence[str]]] = (),
    hang: Sequence[str] = (),
) -> str:
    lines = [f"node {node} {factor}" for node, factor in nodes.items()]
    lines += [f"uplink {factor} {' '.join(behind)}" for factor, behind in uplinks]
    lines += [f"hang {node}" for node in hang]
    return "\n".join(lines)


def fake_nccl_tests(capture: str, table: str) -> str:
    """The script replaying *capture* under the faults of *table* (see :func:`scale_table`)."""
    return _SCRIPT.replace("__TABLE__", table).replace("__CAPTURE__", capture.rstrip("\n"))
