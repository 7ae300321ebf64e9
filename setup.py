"""Package discovery, the one thing pyproject.toml cannot say for this layout.

``[tool.setuptools.packages.find]`` only finds directories named like their package, and the
templates live top-level in ``templates/`` (mapped to ``topograph_slurm.templates`` by
``package-dir`` in pyproject.toml): a find table there would drop them from the wheel, a hand list
drops every package nobody added to it (issue 18). So every ``topograph_slurm*`` package is found
here and the mapped templates package added; everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["topograph_slurm*"]), "topograph_slurm.templates"])
