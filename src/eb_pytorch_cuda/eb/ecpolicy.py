"""Read the test step's settings from an easyconfig file (EasyBuild's own parser, in a child: eb/ecread)."""

import ast
import json
import os
import signal
import subprocess
import sys
from typing import Any, Dict, Optional, Sequence, Tuple

from eb_pytorch_cuda import process
from eb_pytorch_cuda.eb import ecread
from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.inputs import open_regular
from eb_pytorch_cuda.testsuite.policy import settings


def upstream_default_max_failed_tests():
    """The installed easybuild-easyblocks' EB_PyTorch default (0 in 4.9.4, 10 in 5.x); 0 without it."""
    try:
        from easybuild.easyblocks.pytorch import EB_PyTorch
        return int(EB_PyTorch.extra_options()['max_failed_tests'][0])
    except Exception:  # noqa: BLE001 - easyblocks not installed or changed: be strict
        return 0


READ_SECONDS = 300  # an easyconfig still being read after this long never finishes (EasyBuild's parse: < 5 s)


def read_easyconfig(path, timeout: float = READ_SECONDS):
    """{parameter: value} of the test step's parameters (settings.NAMES) set in the easyconfig at path, each
    checked by type and range (settings.check_values); an easyconfig still not read after timeout seconds is bad
    input, and its reading process is stopped with all it started (process: daemons that left its group too).

    The easyconfig is Python, run as `eb` runs it, in a child process (eb/ecread says why): whatever it
    does, sys.exit(), os._exit(0), a raise of KeyboardInterrupt or a kill of its own process included, is
    bad input (PluginError naming the file), never an exit status of ours that a script would read as a
    verdict.  A real SIGINT/SIGTERM reaches this process and stops the child with it.
    """
    found = _parsed(path, settings.NAMES, timeout)
    settings.check_values(found, str(path))
    return found


def _parsed(path, names: Sequence[str], timeout: float = READ_SECONDS) -> Dict[str, Any]:
    """The parameters of names that the easyconfig at path sets, untemplated (EasyBuild's own parser, in a child:
    eb/ecread); PluginError naming the file for whatever the easyconfig's Python does instead."""
    os.close(open_regular(str(path)))  # "no such file" (EasyBuild's parser says "Failed to determine get function")
    argv = [sys.executable, '-c', ecread.CODE, json.dumps(sys.path), str(path), *names]
    try:
        done = process.capture(argv, timeout=timeout, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise PluginError(path, f'is not a readable easyconfig (still not read after {timeout:g} s)') from None
    return _values(path, done)


def read_test_command(path) -> Tuple[Optional[str], str, str]:
    """(runtest, pretestopts, testopts) as written in the easyconfig at path (templates such as %(python)s left for
    run.command.parse_runtest); runtest None where the easyconfig sets none or sets it to True/False (upstream's
    switch "run the default"), so the caller uses its default.  A value of another type is bad input."""
    values = _parsed(path, ('runtest', 'pretestopts', 'testopts'))
    runtest = values.get('runtest')
    if isinstance(runtest, bool) or runtest is None or (isinstance(runtest, str) and not runtest.strip()):
        runtest = None
    elif not isinstance(runtest, str):
        raise PluginError(path, f'runtest must be the test command as a string, not {type(runtest).__name__}')
    options = []
    for name in ('pretestopts', 'testopts'):
        value = values.get(name) or ''
        if not isinstance(value, str):
            raise PluginError(path, f'{name} must be a string, not {type(value).__name__}')
        options.append(value)
    return runtest, options[0], options[1]


def _values(path, done) -> dict:
    """The values the child reported, or PluginError naming the file: how the reading process ended when it
    reported nothing whole, the easyconfig's own error when it did."""
    try:
        answer = json.loads(done.stdout.decode('utf-8'))
    except ValueError:
        answer = None
    if done.returncode != 0 or not isinstance(answer, dict):
        ending = f'was killed by {_signal_name(-done.returncode)}' if done.returncode < 0 \
            else f'ended with exit status {done.returncode}'
        raise PluginError(path, f'is not a readable easyconfig (the process reading it {ending} before it was '
                                f'read whole: os._exit() or a kill in the easyconfig?)')
    if 'error' in answer:
        raise PluginError(path, str(answer['error']))
    found = {}
    for name, text in dict(answer.get('values') or {}).items():
        try:
            found[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise PluginError(path, f'{name} must be a plain value (numbers, strings, lists, dicts), got '
                                    f'{str(text)[:60]}') from None
    return found


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f'signal {signum}'


def read_settings(path) -> settings.TestSettings:
    """The test step's settings of the easyconfig at path."""
    return settings.TestSettings.from_values(read_easyconfig(path), str(path))


def policy_from_values(values, context, source='easyconfig', max_failed_tests=None):
    """Policy from easyconfig values (and an optional budget override); the easyblocks' default budget when
    neither sets one."""
    values = dict(values)
    if max_failed_tests is not None:
        values['max_failed_tests'] = max_failed_tests
    return settings.TestSettings.from_values(values, source).policy(context, upstream_default_max_failed_tests(),
                                                                    source)
