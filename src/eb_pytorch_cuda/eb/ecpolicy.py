"""Read the test policy parameters from an easyconfig file (EasyBuild's own parser, imported on use)."""

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.policy import Policy, known_failures

POLICY_PARAMETERS = ('max_failed_tests', 'excluded_tests', 'known_test_failures', 'rerun_failed_tests',
                     'flaky_failures_consume_budget', 'cuda_compute_capabilities')


def upstream_default_max_failed_tests():
    """The installed easybuild-easyblocks' EB_PyTorch default (0 in 4.9.4, 10 in 5.x); 0 without it."""
    try:
        from easybuild.easyblocks.pytorch import EB_PyTorch
        return int(EB_PyTorch.extra_options()['max_failed_tests'][0])
    except Exception:  # noqa: BLE001 - easyblocks not installed or changed: be strict
        return 0


def read_easyconfig(path):
    """{parameter: value} of the policy parameters set in the easyconfig at path."""
    try:
        from easybuild.framework.easyconfig.parser import EasyConfigParser
        values = EasyConfigParser(str(path)).get_config_dict()
    except ImportError:
        raise PluginError(path, 'reading an easyconfig needs easybuild-framework') from None
    except Exception as err:  # noqa: BLE001 - EasyBuildError and syntax errors alike
        raise PluginError(path, f'is not a readable easyconfig ({" ".join(str(err).split())})') from None
    return {key: values[key] for key in POLICY_PARAMETERS if key in values}


def policy_from_values(values, context, source='easyconfig', max_failed_tests=None):
    """Policy from easyconfig values (and an optional budget override)."""
    budget = max_failed_tests if max_failed_tests is not None else values.get('max_failed_tests')
    if budget is None:
        budget = upstream_default_max_failed_tests()
    return Policy(max_failed_tests=int(budget),
                  known=known_failures(values.get('known_test_failures'), context, source),
                  flaky_consumes_budget=bool(values.get('flaky_failures_consume_budget', False)))
