# The test image with topograph-slurm installed as README's "Install on an admin node" says, from
# the very wheel the product stage tests (tests/product): a venv under /opt over Debian's
# python3 packages (the image's python3-click, python3-yaml, ...), the wheel pip-installed into
# it without the network, and a symlink on PATH. No checkout, no PYTHONPATH. Built by
# harness.ensure_tool_image() for a ClusterSpec(tool=True):
#   docker build -f Dockerfile.tool --build-arg BASE=<test image> --build-arg WHEEL=<file> CTX
ARG BASE
FROM ${BASE}
ARG WHEEL
COPY ${WHEEL} /tmp/
RUN python3 -m venv --system-site-packages /opt/topograph-slurm \
 && /opt/topograph-slurm/bin/pip install --no-deps --no-index --no-cache-dir \
        --disable-pip-version-check --quiet /tmp/${WHEEL} \
 && ln -s /opt/topograph-slurm/bin/topograph-slurm /usr/local/bin/topograph-slurm \
 && rm /tmp/${WHEEL} \
 && topograph-slurm --help >/dev/null
