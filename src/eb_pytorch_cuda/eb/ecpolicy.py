"""Read the test step's settings from an easyconfig file (EasyBuild's own parser, imported on use)."""

import os

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
    found = {key: values[key] for key in settings.NAMES if key in values}
    settings.check_values(found, str(path))
    return found


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
