"""The exception type (and its CorruptElf refinement) the library raises for bad input or a failed operation.

Every message names the file it is about and the problem, on one line, so that the CLI and the
EasyBuild adapters can show it unchanged.
"""


class PluginError(Exception):
    """A problem with an input file or an operation on it; str() is a one-line message."""

    def __init__(self, path: object, problem: object) -> None:
        self.path = str(path) if path is not None else None
        self.problem = ' '.join(str(problem).split())
        super().__init__(self.path and f'{self.path}: {self.problem}' or self.problem)


class CorruptElf(PluginError):
    """An ELF file whose dynamic section or its tables are corrupt (elf/tables.py).

    loader_fails: True when the real glibc loader fails on the file (a crash or a refusal, measured), False
    when it loads it but the section headers contradict what it reads: every command refuses both (patchelf
    and the symbol readers would act on the sections), but doctor, meeting one as a dependency, tells the
    loader's answer apart."""

    def __init__(self, path: object, problem: object, loader_fails: bool) -> None:
        super().__init__(path, problem)
        self.loader_fails = loader_fails


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: raised from a signal handler so that cleanup (``finally``) runs.

    A BaseException, like KeyboardInterrupt, so that ``except Exception`` does not swallow it.
    """

    def __init__(self, signum):
        self.signum = signum
        super().__init__(f'terminated by signal {signum}')
