"""Follow the test command of one step through the code and print the modules it visits, in order.

Usage: python tools/flow_walk.py [--list] [--every] [--min-flow] [--to-popen]

Runs one real test step (`eb-pytorch-cuda test-suite` in-process, on a copy of the stand-in source tree:
two suites in one batch, one with a failing test, one rerun) under a profiler.  From the call of
service.run_suites on (where the step hands its request to the executor), every call of a function of
eb_pytorch_cuda that is handed the step's command (as an argument, or inside one: a plan, a request, a runner
holding a plan) is a stop; not a stop: a dataclass's generated method (making a plan is not visiting plan.py)
and a method of the object holding the command itself (RunPlan.timeout_for reads the plan where its caller
is).  Consecutive stops in one module are one visit; a visit to a module the walk already left is a return.
A flow visits each module once, in order (returns 0); a star goes back to its centre after each call.  Prints
`stops S, modules M, visits V, returns R`, the modules in the order first entered with their visits, and
(--list) every stop.  --every makes every call of the package a stop (the whole call graph the step walks:
leaf helpers such as results/grammar come and go, so it is a star by nature; for comparison).  --min-flow
exits 1 when a module is visited more than once.  --to-popen walks the step's data instead (ToPopen: from
service.run_step, the calls handed StepInputs, StepTerms, the command, the request or the plan, until the
suites' run_test.py starts), counting returns and climbs into a higher layer (a stop whose caller's module
is in a lower layer), and prints the call stack at that Popen.  Nothing is mocked: the stand-in harness runs
as the tests run it.
"""

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import threading
from typing import Any, List, Optional, Tuple

PACKAGE = 'eb_pytorch_cuda'
RUNTEST = 'cd test && %(python)s run_test.py -i test_flaky test_known_failure'


class Walk:
    """The stops of the walk: (module, function) of each call that carries the command."""

    def __init__(self, every: bool = False) -> None:
        self.every = every  # every call of the package from run_suites on, not only those handed the command
        self.command: Optional[Any] = None
        self.stops: List[Tuple[str, str]] = []

    def carries(self, value: Any) -> bool:
        """value is the command, or holds it (.command, .plan.command, .step.command)."""
        if value is self.command:
            return True
        for holder in ('plan', 'step', 'request'):
            value_of = getattr(value, holder, None)
            if value_of is not None and getattr(value_of, 'command', None) is self.command:
                return True
        return getattr(value, 'command', None) is self.command

    def profile(self, frame: Any, event: str, _arg: Any) -> None:
        if event != 'call':
            return
        module = frame.f_globals.get('__name__', '')
        name = frame.f_code.co_name
        if not module.startswith(PACKAGE + '.') or name.startswith('<'):
            return
        if self.command is None:
            if name == 'run_suites' and module.endswith('.service'):
                self.command = getattr(frame.f_locals.get('request'), 'command', None)
            if self.command is None:
                return
        code = frame.f_code
        if code.co_filename == '<string>':  # a dataclass's generated __init__/__eq__: making a value, no visit
            return
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        if names and names[0] == 'self' and getattr(frame.f_locals.get('self'), 'command', None) is self.command:
            return  # the plan's (the request's, the step's) own method reading it: still where the caller is
        if self.every or any(self.carries(frame.f_locals.get(arg)) for arg in names):
            self.stops.append((module[len(PACKAGE) + 1:], code.co_qualname if hasattr(code, 'co_qualname') else name))

    def visits(self) -> List[str]:
        """The modules of the stops, consecutive repeats merged."""
        found: List[str] = []
        for module, _name in self.stops:
            if not found or found[-1] != module:
                found.append(module)
        return found


LAYERS = ('testsuite.service', 'testsuite.sourcetree', 'testsuite.spread', 'testsuite.run', 'testsuite.policy',
          'testsuite.results')


def layer_of(module: str) -> int:
    """The module's layer (setup.cfg's import contracts): 0 the step's service (and sourcetree beside it) ...
    4 results; the package's modules outside the step (process, inputs, escape) below all of them."""
    for index, prefix in enumerate(LAYERS):
        if module == prefix or module.startswith(prefix + '.'):
            return max(0, index - 1)
    return len(LAYERS)


STEP_DATA = ('StepInputs', 'StepTerms', 'TestCommand', 'RunRequest', 'RunPlan')  # what the step's data is made of


def carries_step_data(value: Any) -> bool:
    """value is one of the step's data objects (STEP_DATA), or an object holding one as an attribute."""
    if type(value).__name__ in STEP_DATA:
        return True
    return any(type(getattr(value, holder, None)).__name__ in STEP_DATA for holder in ('plan', 'request', 'command'))


class ToPopen:
    """The walk of the step's data from service.run_step to the start of the suites' run_test.py (the first
    subprocess.Popen whose argv names run_test.py without --dry-run): each call of a function of the package
    handed one of the step's data objects (carries_step_data) is a stop, with the module of its caller; and the
    call stack at that Popen."""

    def __init__(self) -> None:
        self.started = False
        self.stops: List[Tuple[str, str, str]] = []  # (module, function, caller's module)
        self.stack: List[str] = []

    def profile(self, frame: Any, event: str, _arg: Any) -> None:
        if event != 'call' or self.stack:
            return
        module = frame.f_globals.get('__name__', '')
        name = frame.f_code.co_name
        if not self.started:
            self.started = name == 'run_step' and module.endswith('.service')
            if not self.started:
                return
        if module == 'subprocess' and name == '__init__':
            words = ' '.join(map(str, frame.f_locals.get('args') or ()))
            if 'run_test.py' in words and '--dry-run' not in words:
                self._stack_of(frame.f_back)
            return
        code = frame.f_code
        if not module.startswith(PACKAGE + '.') or name.startswith('<') or code.co_filename == '<string>':
            return
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        if any(carries_step_data(frame.f_locals.get(arg)) for arg in names if arg != 'self'):
            caller = frame.f_back.f_globals.get('__name__', '') if frame.f_back else ''
            self.stops.append((module[len(PACKAGE) + 1:], name, caller[len(PACKAGE) + 1:]))

    def _stack_of(self, frame: Any) -> None:
        while frame is not None:
            where = frame.f_globals.get('__name__', '')
            if where.startswith(PACKAGE + '.'):
                self.stack.append(f'{where[len(PACKAGE) + 1:]}.{frame.f_code.co_name}')
            if frame.f_code.co_name == 'run_step' and where.endswith('.service'):
                break
            frame = frame.f_back
        self.stack.reverse()

    def report(self) -> List[str]:
        """stops, modules, visits, returns (a visit to a module the walk already left), climbs (a stop whose
        caller's module is in a lower layer than its own: run/ calling the service), the Popen's stack."""
        visits: List[str] = []
        for module, _name, _caller in self.stops:
            if not visits or visits[-1] != module:
                visits.append(module)
        climbs = [f'{caller} > {module}.{name}' for module, name, caller in self.stops
                  if caller and layer_of(module) < layer_of(caller)]
        modules = list(dict.fromkeys(visits))
        return [f'run_step to the Popen of the suites\' run_test.py: stops {len(self.stops)}, modules {len(modules)}, '
                f'visits {len(visits)}, returns {len(visits) - len(modules)}, climbs {len(climbs)}'
                + (f" ({'; '.join(climbs)})" if climbs else ''),
                'order: ' + ' > '.join(visits),
                f"call frames at the Popen: {len(self.stack)} over {len({f.rsplit('.', 1)[0] for f in self.stack})} "
                f"modules: {' > '.join(self.stack)}"]


def profile_one_step(profile: Any) -> None:
    """One test-suite step on a fresh copy of the stand-in tree, with profile as the profiler of every thread."""
    from eb_pytorch_cuda import cli, standins
    scratch = tempfile.mkdtemp(prefix='flow-walk-')
    try:
        tree = os.path.join(scratch, 'pytorch')
        shutil.copytree(os.path.dirname(os.path.join(standins.TORCH_SOURCES, 'test', '')), os.path.join(tree, 'test'))
        argv = ['test-suite', tree, '--python', sys.executable, '--runtest', RUNTEST, '--rerun', '1',
                '--results', os.path.join(scratch, 'results')]
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            with open(os.devnull, 'w') as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                cli.main(argv)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def walk_to_popen() -> ToPopen:
    """One test-suite step, profiled from run_step to the start of the suites' run_test.py."""
    walk = ToPopen()
    profile_one_step(walk.profile)
    return walk


def walk_one_step(every: bool = False) -> Walk:
    """One test-suite step, profiled from service.run_suites on."""
    walk = Walk(every)
    profile_one_step(walk.profile)
    return walk


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--list', action='store_true', help='print every stop')
    parser.add_argument('--every', action='store_true',
                        help='count every call of the package from run_suites on, not only those handed the command')
    parser.add_argument('--min-flow', action='store_true', help='exit 1 when a module is visited more than once')
    parser.add_argument('--to-popen', action='store_true',
                        help='every call of the package from service.run_step to the Popen of run_test.py: visits, '
                             'returns, climbs into a higher layer, and the call frames at that Popen')
    args = parser.parse_args(argv)
    if args.to_popen:
        walk_popen = walk_to_popen()
        if not walk_popen.stack:
            print('flow_walk: run_test.py was never started from service.run_step', file=sys.stderr)
            return 2
        print('\n'.join(walk_popen.report()))
        if args.list:
            for module, name, caller in walk_popen.stops:
                print(f'  {module}.{name}  (from {caller})')
        return 0
    walk = walk_one_step(args.every)
    if walk.command is None:
        print('flow_walk: service.run_suites was never called', file=sys.stderr)
        return 2
    visits = walk.visits()
    modules = list(dict.fromkeys(visits))
    print(f'stops {len(walk.stops)}, modules {len(modules)}, visits {len(visits)}, '
          f'returns {len(visits) - len(modules)}')
    for module in modules:
        print(f'  {module:40} {visits.count(module)}')
    print('order: ' + ' > '.join(visits))
    if args.list:
        for module, name in walk.stops:
            print(f'  {module}.{name}')
    return 1 if args.min_flow and len(visits) != len(modules) else 0


if __name__ == '__main__':
    sys.exit(main())
