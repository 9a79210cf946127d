"""`eb-pytorch-cuda test-suite`: the test step on a PyTorch source tree's suites against an installed torch,
outside EasyBuild: the inputs checked and made from a tree, a Python and a results directory, then the one step
(service.run_step) with the terminal as its host.
"""

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

from eb_pytorch_cuda import process
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.escape import printable
from eb_pytorch_cuda.inputs import make_directory, remove_made
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.run.command import TestCommand
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.service import StepInputs, StepOutcome, easyconfig_command, no_installation, run_step

DEFAULT_RUNTEST = 'cd test && %(python)s run_test.py --continue-through-error %(excluded_tests)s'


_IS_PYTHON = 'import sys; print("python", sys.hexversion)'


class TerminalHost:
    """The step's host on a terminal: progress on stderr as `== ...` lines, escaped; the build's CUDA asked of
    the torch that python imports; no installation made (the suites test what python imports)."""

    def __init__(self, python: str) -> None:
        self.python = python

    def say(self, message: str) -> None:
        print(f'== {printable(message)}', file=sys.stderr, flush=True)

    def has_cuda(self, installation: Optional[str]) -> bool:
        return torch_has_cuda(self.python)

    tested_installation = staticmethod(no_installation)


def check_inputs(source: str, python: str) -> str:
    """The test directory of source; PluginError (bad input) when source or python is unusable.  python must
    run as a Python (one short child): `/bin/false` or `/bin/true` is refused here, before the results
    directory, its lock and its registry are created, so a refusal leaves none of them behind."""
    test_dir = os.path.join(source, 'test')
    if not os.path.isfile(os.path.join(test_dir, 'run_test.py')):
        raise PluginError(source, 'is not a PyTorch source tree (no test/run_test.py)')
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise PluginError(python, 'is not an executable Python' + ('' if os.sep in python else ' (nor found on PATH)'))
    try:
        done = process.capture([python, '-c', _IS_PYTHON], timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise PluginError(python, f'is not an executable Python ({getattr(err, "strerror", None) or err})') \
            from None
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 2 or words[0] != b'python' or not words[1].isdigit():
        raise PluginError(python, f'is not a Python (`-c` code exited {done.returncode} without printing its '
                                  f'version)')
    return test_dir


def make_results_dir(results_dir: str) -> List[str]:
    """Create results_dir (and its parents); return the directories this call created (inputs.make_directory);
    PluginError naming it when it cannot be (`--results /dev/full`: "is a character device, not a directory",
    a dangling symlink: "is a dangling symlink", where os.makedirs says only "File exists")."""
    return make_directory(results_dir)


def store_for(results_dir: str, source: str, python: str, argv: Sequence[str],
              command_env: Optional[Dict[str, str]] = None) -> ResultStore:
    """The results store of this tree, Python and command (its argv and the assignments of its runtest line and
    pretestopts) in results_dir: the same command again runs only what is missing."""
    facts: Dict[str, object] = {'source': os.path.realpath(source), 'python': os.path.abspath(python),
                                'argv': list(argv)}
    if command_env:  # a command without assignments keeps the key it always had
        facts['env'] = dict(sorted(command_env.items()))
    key = json.dumps(facts)
    fingerprint = hashlib.sha256(key.encode()).hexdigest()
    return ResultStore(os.path.join(results_dir, 'results.jsonl'), fingerprint)


def source_tree_command(source: str, python: str, runtest: Optional[str] = None, excluded: Sequence[str] = (),
                        pretestopts: str = '', testopts: str = '', origin: str = 'runtest') -> TestCommand:
    """The test command of `test-suite` on source's test/ with python: runtest (an easyconfig's with its
    pretestopts and testopts, or --runtest), else DEFAULT_RUNTEST, built as the test step builds its own
    (easyconfig_command); origin names where a part that needs a shell came from."""
    # the command runs in test/; a venv's python must stay a path into the venv
    return easyconfig_command(runtest or DEFAULT_RUNTEST, pretestopts, testopts, origin, os.path.abspath(source),
                              os.path.abspath(python), excluded)


def torch_has_cuda(python: str) -> bool:
    """The torch that python imports is a CUDA build: its lib/ holds libtorch_cuda.so (found without importing
    torch, which takes seconds)."""
    code = ("import importlib.util as u, os; s = u.find_spec('torch'); "
            "print(os.path.isfile(os.path.join(s.submodule_search_locations[0], 'lib', 'libtorch_cuda.so')) "
            "if s and s.submodule_search_locations else False)")
    try:
        done = process.capture([python, '-c', code], timeout=60)
    except (OSError, PluginError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == b'True'


def test_source_tree(source: str, results_dir: str, inputs: StepInputs, host: Optional[TerminalHost] = None
                     ) -> StepOutcome:
    """The test step (service.run_step) of inputs on source's test/ with their Python; results, outputs and
    reports kept in results_dir.  Every refusal of the inputs comes before anything is created; a refusal
    before any suite was stored (the harness's own dry run failed: a torch that does not import) removes the
    directory this call made."""
    check_inputs(source, inputs.python)
    made: List[str] = []
    stores: List[ResultStore] = []

    def store_of(command: TestCommand) -> ResultStore:
        discovery.check_command(command)  # every refusal of the inputs before anything is created
        made.extend(make_results_dir(results_dir))
        stores.append(store_for(results_dir, source, inputs.python, command.argv, command.env))
        return stores[-1]
    try:
        return run_step(dataclasses.replace(inputs, store=store_of), host or TerminalHost(inputs.python))
    except PluginError:
        # refused before any suite was stored (the harness's own dry run failed: a torch that does not import):
        # every directory this call made (--results a/new/deep: new/ too), with only its lock and registry in it,
        # goes again
        if made and stores and not os.path.exists(stores[-1].path):
            remove_made(made, with_contents=True)
        raise
