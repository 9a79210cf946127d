"""How the runners start a run_test.py call: a Launcher, injected (as auditwheel injects its ElfPatcher), whose
default (PROCESSES) starts a real process group under eb_pytorch_cuda.process, as every call did before.

Why: the batch logic (which suite settled when, what a killed batch leaves to run alone, which record the
batch's end corrects) is most of run/batches, and it depends only on what the call wrote and how it ended;
a launcher that writes a real harness's captured output (tests/data) lets unit tests drive that logic
without starting a process.
"""

import subprocess
from typing import IO, Mapping, Optional, Protocol, Sequence, Tuple

from eb_pytorch_cuda import process


TimeoutExpired = subprocess.TimeoutExpired  # what a Running's wait raises when its timeout passes first


class Running(Protocol):
    """A started call (eb_pytorch_cuda.process.Child is one)."""

    def wait(self, timeout: Optional[float] = None) -> int:
        """Its exit status; TimeoutExpired when timeout passes first."""

    def stop(self) -> Optional[int]:
        """Stop it (its whole process group); its status if known."""


class Launcher(Protocol):
    """Starts a call: argv (no shell) in cwd with env, stdout and stderr into output."""

    def start(self, argv: Sequence[str], cwd: str, env: Mapping[str, str], output: IO) -> Running:
        """The started call."""


class Processes:
    """The launcher of real calls: each in its own process group (eb_pytorch_cuda.process), stderr into stdout."""

    def start(self, argv: Sequence[str], cwd: str, env: Mapping[str, str], output: IO) -> Running:
        return process.start(list(argv), cwd=cwd, env=dict(env), stdout=output, stderr=subprocess.STDOUT)


PROCESSES = Processes()


def run_to_end(launcher: Launcher, argv: Sequence[str], cwd: str, env: Mapping[str, str], output: IO,
               timeout: Optional[float]) -> Tuple[Optional[int], bool]:
    """Run a call to its end or its timeout: (status or None, timed out); stopped either way (an interrupt
    included), as eb_pytorch_cuda.process.run."""
    child = launcher.start(argv, cwd, env, output)
    try:
        return child.wait(timeout=timeout), False
    except subprocess.TimeoutExpired:
        child.stop()
        return None, True
    except BaseException:
        child.stop()
        raise
