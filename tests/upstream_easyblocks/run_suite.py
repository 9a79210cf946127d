"""Run upstream easybuild-easyblocks' own easyblock tests on our easyblock, deployed as a site deploys it.

Upstream runs, for every easyblock file, `template_init_test` (test/easyblocks/init_easyblocks.py:
the file's text rules, instantiation, extra_options format) and `template_module_only_test`
(test/easyblocks/module.py: `--module-only` makes a module file, in the module syntax EasyBuild is
configured with).  This script runs both, unchanged (the vendored copies beside it, one directory per
upstream ref), on one easyblock file, with the arguments upstream's suite() would give a file of that
name, after deploying it:

  --include PATH ...  as `eb --include-easyblocks=PATH,...` does (EasyBuild's own include_easyblocks);
  nothing            the easyblock must already be what `easybuild.easyblocks.pytorch` imports (a site
                     easyblocks tree first on PYTHONPATH, or a pip-installed copy included by the caller).

It also checks that EB_PyTorch is ours (not upstream's file loaded under our name) and that upstream's
module-level API is still importable from easybuild.easyblocks.pytorch.  Exit 0 when all passed.
"""

import argparse
import importlib
import inspect
import os
import sys
import tempfile
import unittest

MARKER = 'eb-pytorch-cuda easyblock: extends the EB_PyTorch of easybuild-easyblocks'
# what upstream's module offers at module level, per major version (4.9.4: the log parser only)
UPSTREAM_API = {4: ('parse_test_log', 'find_failed_test_names'),
                5: ('parse_test_log', 'get_test_results', 'TestState', 'TestSuite', 'find_failed_test_names')}


def upstream_suite_module(suite_dir, name):
    """Import one of upstream's vendored test modules (init_easyblocks, module) from suite_dir."""
    sys.path.insert(0, suite_dir)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(suite_dir)


def check_deployment(easyblock_file):
    """EB_PyTorch comes from a copy of our file, and upstream's API is where other code imports it from."""
    from easybuild.framework.easyconfig.easyconfig import get_easyblock_class
    from easybuild.tools.version import VERSION
    cls = get_easyblock_class('EB_PyTorch')
    source = os.path.realpath(inspect.getsourcefile(cls))  # an included easyblock is a symlink
    with open(source) as handle:
        assert MARKER in handle.read(), f'EB_PyTorch comes from {source}, not from our easyblock'
    upstream_source = os.path.realpath(inspect.getsourcefile(cls.__mro__[1]))
    with open(upstream_source) as handle:
        assert MARKER not in handle.read(), f'our easyblock extends itself ({upstream_source})'
    module = importlib.import_module('easybuild.easyblocks.pytorch')
    upstream = sys.modules[cls.__mro__[1].__module__]
    names = UPSTREAM_API[int(str(VERSION).split('.')[0])]
    missing = [name for name in names if getattr(module, name, None) is not getattr(upstream, name)]
    assert not missing, f'upstream names not reachable (as the same objects) as easybuild.easyblocks.pytorch: {missing}'
    print(f'deployment: EB_PyTorch from {source}, extending {upstream_source}; upstream API reachable')


def run(suite_dir, easyblock_file):
    """Upstream's init test, then its --module-only test, of easyblock_file; return the failures."""
    init = upstream_suite_module(suite_dir, 'init_easyblocks')

    def test_init_eb_pytorch_cuda(self):
        init.template_init_test(self, easyblock_file)
    init.InitTest.test_init_eb_pytorch_cuda = test_init_eb_pytorch_cuda

    loader = unittest.TestLoader()
    runner = unittest.TextTestRunner(verbosity=2, stream=sys.stdout)
    results = [runner.run(unittest.TestSuite([init.InitTest('test_init_eb_pytorch_cuda')]))]
    check_deployment(easyblock_file)

    module = upstream_suite_module(suite_dir, 'module')
    # configures EasyBuild as upstream's module-only run does (--force --module-only); 4.9.4's takes no loader
    module.suite(loader) if inspect.signature(module.suite).parameters else module.suite()
    # the name upstream's suite() gives a software-specific easyblock file of this name
    name = os.path.basename(easyblock_file).replace('.', '-') + '-sw'

    def test_module_only_eb_pytorch_cuda(self):
        module.template_module_only_test(self, easyblock_file, name=name)
    module.ModuleOnlyTest.test_module_only_eb_pytorch_cuda = test_module_only_eb_pytorch_cuda
    results.append(runner.run(unittest.TestSuite([module.ModuleOnlyTest('test_module_only_eb_pytorch_cuda')])))
    modules = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(module.TMPDIR, 'modules', 'all', name))
               for f in fs]
    print(f"module files ({os.environ.get('EASYBUILD_MODULE_SYNTAX', 'default syntax')}): {modules}")
    return sum(len(r.failures) + len(r.errors) for r in results) + (0 if modules else 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--suite-dir', required=True, help="vendored upstream test/easyblocks/ of one ref")
    parser.add_argument('--easyblock', required=True, help='our easyblock file, as deployed')
    parser.add_argument('--include', nargs='*', default=[], help='include these easyblocks first (eb does)')
    args = parser.parse_args(argv)
    sys.argv[1:] = []  # upstream's 4.9.4 suite parses EasyBuild options from the command line
    if args.include:
        from easybuild.tools.include import include_easyblocks
        include_easyblocks(tempfile.mkdtemp(prefix='eb-include-'), args.include)
    failures = run(os.path.abspath(args.suite_dir), os.path.abspath(args.easyblock))
    print(f'upstream easyblock suite: {"FAILED" if failures else "passed"} ({failures} failure(s))')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
