"""Read the test step's settings from an easyconfig file (EasyBuild's own parser, imported on use)."""

import os
from typing import Any, Dict, Optional, Tuple

from eb_pytorch_cuda.errors import PluginError, Terminated
from eb_pytorch_cuda.inputs import open_regular
from eb_pytorch_cuda.testsuite.policy import settings


def upstream_default_max_failed_tests():
    """The installed easybuild-easyblocks' EB_PyTorch default (0 in 4.9.4, 10 in 5.x); 0 without it."""
    try:
        from easybuild.easyblocks.pytorch import EB_PyTorch
        return int(EB_PyTorch.extra_options()['max_failed_tests'][0])
    except Exception:  # noqa: BLE001 - easyblocks not installed or changed: be strict
        return 0


def read_easyconfig(path):
    """{parameter: value} of the test step's parameters (settings.NAMES) set in the easyconfig at path, each
    checked by type and range (settings.check_values).

    The easyconfig is Python, run as `eb` runs it: whatever it raises, sys.exit() included, is bad input
    (PluginError naming the file), never an exit status of its own that a script would read as a verdict.
    """
    found = {key: value for key, value in _parsed(path).items() if key in settings.NAMES}
    settings.check_values(found, str(path))
    return found


def _parsed(path) -> Dict[str, Any]:
    """Every parameter the easyconfig at path sets, untemplated (EasyBuild's own parser); PluginError naming the
    file for whatever the easyconfig's Python does instead of defining parameters."""
    os.close(open_regular(str(path)))  # "no such file" (EasyBuild's parser says "Failed to determine get function")
    try:
        from easybuild.framework.easyconfig.parser import EasyConfigParser
    except ImportError:
        raise PluginError(path, 'reading an easyconfig needs easybuild-framework') from None
    try:
        values = EasyConfigParser(str(path)).get_config_dict()
    except SystemExit as err:
        raise PluginError(path, f'is not a readable easyconfig (it called sys.exit({err.code!r:.40}))') from None
    except (KeyboardInterrupt, Terminated):
        raise  # a signal that arrived while it was read, not the easyconfig's doing
    except BaseException as err:  # noqa: BLE001 - EasyBuildError, syntax errors and any other raise alike
        problem = " ".join(str(err).split())[:300] or type(err).__name__
        raise PluginError(path, f'is not a readable easyconfig ({problem})') from None
    return values


def read_test_command(path) -> Tuple[Optional[str], str, str]:
    """(runtest, pretestopts, testopts) as written in the easyconfig at path (templates such as %(python)s left for
    run.command.parse_runtest); runtest None where the easyconfig sets none or sets it to True/False (upstream's
    switch "run the default"), so the caller uses its default.  A value of another type is bad input."""
    values = _parsed(path)
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
