"""Turn an easyconfig's `runtest` string into a working directory, environment and argv: no shell involved.

EasyBuild easyconfigs write the PyTorch test command as a shell line, e.g.
    cd test && PYTORCH_TEST_WITH_SLOW=1 %(python)s run_test.py --continue-through-error %(excluded_tests)s
Test names and paths must never pass through a shell, so the line is split with shlex and only its
simple forms are accepted: leading `cd DIR &&`, `VAR=value` assignments, then the command;
%(excluded_tests)s becomes `-x name ...` as separate arguments.  Anything else (pipes, `;`, `$(...)`,
redirections) is refused with a message saying so.
"""

import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.run.shellwords import split_words

_ASSIGNMENT = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*=')
_SHELL_SYNTAX = ('|', ';', '>', '<', '`', '$(', '||', '&')

# PyTorch's harness switches to PyTorch's own CI mode when CI is non-empty (common_utils.IS_CI, read by
# run_test.py): logs piped to files, target determination that skips suites, its own timeouts and reruns,
# downloads of test times, and handlers that expect CI-only failures (test_ci_sanity_check_fail).  GitLab
# and GitHub runners set CI=true, so a build run inside a CI job would otherwise test differently from the
# same build on a build node.
CI_MODE_VARIABLES = ('CI',)

# Linux refuses execve() (E2BIG, "Argument list too long") when one argument or environment string, its
# terminating NUL included, is longer than 32 pages (MAX_ARG_STRLEN): 131,071 bytes pass, 131,072 do not
MAX_ARG_STRLEN = 32 * 4096


@dataclass
class TestCommand:
    cwd: str
    env: dict = field(default_factory=dict)
    argv: list = field(default_factory=list)


def parse_runtest(runtest: str, start_dir: str, python: str, excluded: Sequence[str] = ()) -> TestCommand:
    """TestCommand for runtest (templates %(python)s and %(excluded_tests)s resolved here)."""
    marker = '\0EXCLUDED\0'
    text = runtest.replace('%(python)s', python).replace('%(excluded_tests)s', f' {marker} ')
    try:
        words = split_words(text)
    except ValueError as err:
        raise PluginError('runtest', f'cannot be split into words ({err}): {runtest!r}') from None
    cwd = start_dir
    if len(words) >= 3 and words[0] == 'cd' and words[2] == '&&':
        cwd = os.path.normpath(os.path.join(start_dir, words[1]))
        words = words[3:]
    env = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition('=')
        env[name] = value
    for word in words:
        if word != marker and any(token in word for token in _SHELL_SYNTAX) and not word.startswith('-'):
            raise PluginError('runtest', f'uses shell syntax ({word!r}); write it as "[cd DIR &&] [VAR=value ...] '
                                         f'command args" so it can run without a shell: {runtest!r}')
    argv = []
    for word in words:
        if word == marker:
            argv += ['-x', *excluded] if excluded else []
        else:
            argv.append(word)
    if not argv:
        raise PluginError('runtest', f'has no command: {runtest!r}')
    return TestCommand(cwd, env, argv)


def harness_environment(environ: Mapping[str, str], command: TestCommand) -> Dict[str, str]:
    """The environment the suites of command run in: environ (into which callers have merged the runtest
    line's assignments, then their own, e.g. the test installation's PYTHONPATH) without PyTorch's CI-mode
    switch, unless the runtest line sets it itself."""
    env = {name: value for name, value in environ.items() if name not in CI_MODE_VARIABLES}
    env.update({name: value for name, value in command.env.items() if name in CI_MODE_VARIABLES})
    return env


def _shown(text: str) -> str:
    """text as repr() shows it, cut to a readable length for a one-line message."""
    shown = repr(text)
    return shown if len(shown) <= 200 else f'{shown[:160]}... ({len(text)} characters)'


def _words(source: str, parameter: str, text: str) -> List[str]:
    """The words of one of the easyconfig's test command strings; PluginError naming source and parameter for
    what no command can hold: a NUL byte (execve() ends a string there; subprocess refuses it with a
    traceback), a word over MAX_ARG_STRLEN (execve() fails with E2BIG, after minutes of splitting before),
    or unbalanced quotes."""
    if '\0' in text:
        raise PluginError(source, f'{parameter} holds a NUL byte, which no argument or environment value can '
                                  f'hold: {_shown(text)}')
    try:
        words = split_words(text)
    except ValueError as err:
        raise PluginError(source, f'{parameter} cannot be split into words ({err}): {_shown(text)}') from None
    for word in words:
        size = len(os.fsencode(word)) + 1
        if size > MAX_ARG_STRLEN:
            raise PluginError(source, f"{parameter} has a word of {size - 1} bytes ({_shown(word[:40])}...), over "
                                      f"the kernel's {MAX_ARG_STRLEN} bytes for one argument or environment "
                                      f'string (MAX_ARG_STRLEN): it cannot run')
    return words


def with_test_options(runtest: str, pretestopts: Optional[str] = '', testopts: Optional[str] = '',
                      source: str = 'easyconfig') -> Tuple[str, Dict[str, str]]:
    """(runtest with testopts appended, {VAR: value} from pretestopts): as PythonPackage.test_step joins
    `pretestopts runtest testopts` into one shell line, without the shell.  pretestopts may hold only
    `export VAR=value &&` (or `;`) and `VAR=value` words: those set the test command's environment (the
    runtest line's own assignments win, as in the shell); anything else in it (`ulimit ...`, a command) would
    need a shell and is refused in one line naming the parameter, rather than dropped.  A NUL byte or a word
    too long for execve() in any of the three is refused naming it (_words)."""
    _words(source, 'runtest', runtest)
    _words(source, 'testopts', str(testopts or ''))
    runtest = f'{runtest} {testopts}' if testopts and str(testopts).strip() else runtest
    env = {}
    for word in _words(source, 'pretestopts', pretestopts or ''):
        if word in ('export', '&&', ';'):
            continue
        word = word[:-1] if word.endswith(';') else word
        if not _ASSIGNMENT.match(word) or any(token in word for token in _SHELL_SYNTAX):
            raise PluginError(source, f'pretestopts: {_shown(word)} needs a shell; only `export VAR=value &&` and '
                                      f'`VAR=value` are applied to the test command (no shell): '
                                      f'{_shown(pretestopts or "")}')
        name, _, value = word.partition('=')
        env[name] = value
    return runtest, env
