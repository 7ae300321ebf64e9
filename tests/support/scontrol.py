"""A stand-in ``scontrol`` program that replays recorded answers, for unit tests.

The real code path runs it as a subprocess, exactly as it runs the real ``scontrol``; only the
answers are recordings (from the real 24.11.5 / 26.05.5 test cluster; the tests say which).
Every call's arguments are appended to ``calls`` so a test can see what was (not) run.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Answer:
    """What one command line prints and exits with; ``then`` runs after (e.g. ``cp``)."""

    stdout: str | bytes = ""  # bytes: printed as they are (not UTF-8, say)
    stderr: str = ""
    code: int = 0
    then: str = ""


class ReplayScontrol:
    """``scontrol`` (or any command name) answering by its arguments; unknown ones exit 1."""

    def __init__(self, directory: Path, answers: dict[str, Answer], name: str = "scontrol"):
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / name
        self.calls_file = directory / f"{name}.calls"
        cases = []
        for i, (args, answer) in enumerate(answers.items()):
            out, err = directory / f"{name}.{i}.out", directory / f"{name}.{i}.err"
            out.write_bytes(
                answer.stdout if isinstance(answer.stdout, bytes) else answer.stdout.encode()
            )
            err.write_text(answer.stderr)
            body = f"cat {shlex.quote(str(out))}; cat {shlex.quote(str(err))} >&2; {answer.then}"
            cases.append(f"  {shlex.quote(args)}) {body}\n    exit {answer.code};;")
        self.path.write_text(
            "#!/bin/sh\n"
            "PATH=/usr/bin:/bin:$PATH  # its own tools, whatever PATH a test gives the caller\n"
            f'echo "$*" >> {shlex.quote(str(self.calls_file))}\n'
            'case "$*" in\n'
            + "\n".join(cases)
            + '\n  *) echo "unexpected: $*" >&2; exit 1;;\nesac\n'
        )
        self.path.chmod(0o755)

    @property
    def calls(self) -> list[str]:
        """The argument lines of every call so far, in order."""
        if not self.calls_file.exists():
            return []
        return self.calls_file.read_text().splitlines()
