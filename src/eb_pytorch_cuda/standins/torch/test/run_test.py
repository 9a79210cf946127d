"""A small run_test.py in the shape of PyTorch's: the same console output, -x/-i selection, XML reports.

Each test_*.py file is a suite run in its own process; output forms follow PyTorch 2.x's run_test.py
("Selected tests:", "Running <suite> 1/1 ... [time]", "<suite> 1/1 failed![ Received signal: SIGx]").
"""

import argparse
import datetime
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SIGNALS = {getattr(signal, n): n for n in dir(signal) if n.startswith('SIG') and '_' not in n}


def can_run_in_pytest(test):
    """As PyTorch 2.1+'s run_test.py: every suite under pytest unless PYTORCH_TEST_DO_NOT_USE_PYTEST is set
    (the stand-in's suites are unittest files that write their XML report either way)."""
    return os.getenv('PYTORCH_TEST_DO_NOT_USE_PYTEST', '0') == '0'


def discover():
    tests = []
    for dirpath, _, files in os.walk(HERE):
        for name in files:
            if name.startswith('test_') and name.endswith('.py'):
                tests.append(os.path.relpath(os.path.join(dirpath, name), HERE)[:-3])
    return sorted(tests)


TESTS = discover()  # as PyTorch's run_test.py: every test file of the tree (the selection probe reads it)


def parse_args():
    """The options, as PyTorch's parse_args() returns them (the unknown arguments kept for the test files)."""
    parser = argparse.ArgumentParser()
    parser.add_argument('-x', '--exclude', nargs='+', default=[])
    parser.add_argument('-i', '--include', nargs='+', default=[])
    parser.add_argument('--continue-through-error', action='store_true')
    parser.add_argument('--verbose', action='store_true')
    parser.add_argument('--dry-run', action='store_true', help='only list the tests that would run')
    args, args.extra = parser.parse_known_args()
    return args


def get_selected_tests(options):
    """The suites to run, as PyTorch's get_selected_tests(options): -i, else every test file, less -x."""
    return [t for t in (options.include or discover()) if t not in options.exclude]


def main():
    args = parse_args()
    extra = args.extra
    selected = get_selected_tests(args)
    print('Selected tests:\n ' + '\n '.join(selected), file=sys.stderr, flush=True)
    if args.dry_run:
        return 0
    failures = []
    for test in selected:
        print(f'Running {test} 1/1 ... [{datetime.datetime.now()}]', flush=True)
        if os.environ.get('STANDIN_RUN_LOG'):  # lets tests see which suites ran, across eb runs
            with open(os.environ['STANDIN_RUN_LOG'], 'a') as log:
                log.write(test + '\n')
        code = subprocess.call([sys.executable, f'{test}.py', *extra], cwd=HERE)
        if code != 0:
            message = f'{test} 1/1 failed!'
            if code < 0:
                message += f' Received signal: {SIGNALS.get(-code, -code)}'
            print(message, flush=True)
            failures.append(message)
            if not args.continue_through_error:
                break
    for message in failures:
        print(message, file=sys.stderr, flush=True)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
