"""What every run_test.py call of a test command gets: its options (keep going, per-suite logs, XML reports
where the suites can write them) and its environment (the XML switch, the GPU, the attempt's report
directory), shared by the batches, a suite run alone, a Slurm job's claims and (without the XML switch)
the reruns; run/plan works the options out once per run.
"""

import signal
import subprocess
from typing import Dict, List, Mapping, Optional

from eb_pytorch_cuda import process
from eb_pytorch_cuda.testsuite.results.reportdirs import Attempt
from eb_pytorch_cuda.testsuite.run.command import TestCommand
from eb_pytorch_cuda.testsuite.run.harness import Harness

DEFAULT_BATCH_SIZE = 50  # suites per run_test.py call: ~4 s of start-up per 50 suites, resume granularity
XML_VARIABLE = 'EASYBUILD_WRITE_PYTORCH_TEST_REPORTS'  # upstream EB_PyTorch's switch for XML reports


def batch_options(harness: Harness, save_xml: bool = True) -> List[str]:
    """Options added to each batch call: keep going after a failed suite, per-suite logs, XML reports."""
    options = ['--continue-through-error']
    if harness.pipe_logs:
        options.append('--pipe-logs')
    if save_xml and harness.forwards_unknown_args:
        options.append('--save-xml')  # passed on to every test file (common_utils), as in CI mode
    elif save_xml and harness.positional_unittest_args:
        options += ['--', '--save-xml']  # 2.1: after `--`, for every test file (discovery.run_argv keeps it last)
    return options


def xml_reports_safe(harness: Harness, command: TestCommand, env: Mapping[str, str]) -> bool:
    """Whether the suites can be asked for XML reports (--save-xml).  Under pytest they always can (pytest
    writes them); under unittest (a harness older than 2.1, or PYTORCH_TEST_DO_NOT_USE_PYTEST set)
    common_utils.run_tests imports xmlrunner on --save-xml, so every suite would die of an ImportError
    where the test Python lacks unittest-xml-reporting (PyTorch 2.1.2's easyconfigs do not bring it)."""
    if harness.pytest_by_default and env.get('PYTORCH_TEST_DO_NOT_USE_PYTEST', '0') == '0':
        return True
    key = (command.argv[0], command.cwd, tuple(sorted(env.items())))
    if key not in _XMLRUNNER_FOUND:
        try:
            done = process.capture([command.argv[0], '-c', 'import xmlrunner'], timeout=300, cwd=command.cwd,
                                   env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return False  # not a Python, or it hung: no XML this time, asked again next time
        _XMLRUNNER_FOUND[key] = done.returncode == 0
    return _XMLRUNNER_FOUND[key]


_XMLRUNNER_FOUND: dict = {}  # (test command's program, its directory, environment) -> imports xmlrunner


def batch_env(env: Mapping[str, str], gpu: Optional[str] = None, attempt: Optional[Attempt] = None
              ) -> Dict[str, str]:
    """The suites' environment: XML reports on (into attempt's own directory, when given), the GPU."""
    env = dict(env)
    if attempt is not None:
        env.update(attempt.env)
    env[XML_VARIABLE] = '1'  # test files of a torch built by EB_PyTorch >= 1.10 write XML reports with it
    if gpu is not None:
        env['CUDA_VISIBLE_DEVICES'] = str(gpu)
    return env


def died_by(code: Optional[int]) -> Optional[str]:
    """The signal's name when a call's status says it was killed by one (Popen's negative status), else None."""
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f'signal {-code}'


# signals a suite's process never sends itself (a crash is SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL): one of these is
# a kill from outside (the OOM killer, an operator, a batch system), which says nothing about the suite's tests
OUTSIDE_SIGNALS = ('SIGKILL', 'SIGTERM', 'SIGINT', 'SIGHUP')


def killed_from_outside(status: object, signal_name: Optional[str]) -> Optional[str]:
    """signal_name when a suite's outcome is `terminated` by one of OUTSIDE_SIGNALS, else None: such a record is
    marked interrupted (results.records.StoreRecord), so a rerun of the build runs the suite again."""
    return signal_name if str(status) == 'terminated' and signal_name in OUTSIDE_SIGNALS else None
