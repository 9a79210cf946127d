"""Follow the test command of one step through the code and print the modules it visits, in order.

Usage: python tools/flow_walk.py [--list] [--every] [--min-flow]

Runs one real test step (`eb-pytorch-cuda test-suite` in-process, on a copy of the stand-in source tree:
two suites in one batch, one with a failing test, one rerun) under a profiler.  From the call of
service.run_suites on (where the step hands its request to the executor), every call of a function of eb_pytorch_cuda that is handed the step's command
(as an argument, or inside one: a plan, a request, a step, a runner holding a plan) is a stop; not a stop:
a dataclass's generated method (making a plan is not visiting plan.py) and a method of the object holding
the command itself (RunPlan.timeout_for reads the plan where its caller is).  Consecutive
stops in one module are one visit; a visit to a module the walk already left is a return.  A flow visits
each module once, in order (returns 0); a star goes back to its centre after each call.  Prints
`stops S, modules M, visits V, returns R`, the modules in the order first entered with their visits, and
(--list) every stop.  --every makes every call of the package a stop (the whole call graph the step
walks: leaf helpers such as results/grammar come and go, so it is a star by nature; for comparison).
--min-flow exits 1 when a module is visited more than once.  Nothing is mocked: the stand-in harness runs
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


def walk_one_step(every: bool = False) -> Walk:
    """One test-suite step on a fresh copy of the stand-in tree, profiled."""
    from eb_pytorch_cuda import cli, standins
    walk = Walk(every)
    scratch = tempfile.mkdtemp(prefix='flow-walk-')
    try:
        tree = os.path.join(scratch, 'pytorch')
        shutil.copytree(os.path.dirname(os.path.join(standins.TORCH_SOURCES, 'test', '')), os.path.join(tree, 'test'))
        argv = ['test-suite', tree, '--python', sys.executable, '--runtest', RUNTEST, '--rerun', '1',
                '--results', os.path.join(scratch, 'results')]
        threading.setprofile(walk.profile)
        sys.setprofile(walk.profile)
        try:
            with open(os.devnull, 'w') as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                cli.main(argv)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return walk


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--list', action='store_true', help='print every stop')
    parser.add_argument('--every', action='store_true',
                        help='count every call of the package from run_suites on, not only those handed the command')
    parser.add_argument('--min-flow', action='store_true', help='exit 1 when a module is visited more than once')
    args = parser.parse_args(argv)
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
