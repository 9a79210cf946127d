"""What each `eb-pytorch-cuda` subcommand's --help says above and below its options: a description and examples.

Kept apart from cli.py's argument definitions so that a command's text reads as one piece.  Each example is a
command as a user types it; the documentation is named by its address (a pip install has no docs/ directory).
"""

import argparse
import textwrap
from typing import Any, Dict

from eb_pytorch_cuda import docs_url

PROG = 'eb-pytorch-cuda'
EC = 'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'
WIDTH = 79  # the description's lines, as argparse wraps the options' help on an 80-column terminal
LIB = '$EBROOTPYTORCH/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so'

_ABOUT = {
    'add-needed': (
        "Add DT_NEEDED entries to a shared library, so that the loader maps each library at load time through "
        "the patched library's own RPATH/RUNPATH: the fix for cuDNN's sub-libraries that a dlopen()ed cuDNN "
        "library cannot find on an RPATH-linked stack. Idempotent (an entry already there is left as it is), "
        "atomic (a copy is patched and renamed over the file), and refused for an entry that would not resolve "
        "from the library (unless --force).",
        [f'{PROG} add-needed {LIB} libcudnn_cnn_train.so.8',
         f'{PROG} cudnn-catalog    # which sonames to add, per cuDNN major version'],
        ('reference', 'command-line-eb-pytorch-cuda')),
    'check-needed': (
        "Prove NEEDED entries: each present, resolving (as glibc's loader searches, LD_LIBRARY_PATH unset), "
        "inside --expect-dir if given, and with --load mapped by a real load of the library in a clean process. "
        "Exit 1 naming the library and the soname when one is not.",
        [f'{PROG} check-needed {LIB} libcudnn_cnn_train.so.8 --expect-dir $EBROOTCUDNN/lib --load'],
        ('reference', 'command-line-eb-pytorch-cuda')),
    'report': (
        "Judge a finished PyTorch test run: run_test.py console logs, test-reports directories (JUnit XML), the "
        "JSON results our easyblock saves, or EasyBuild's failure summary. Without --easyconfig a saved JSON "
        "result is judged by the terms it was judged by; with it, by the easyconfig's budget and known failures "
        "for the target. Exit 0 on PASS, 1 on FAIL.",
        [f'{PROG} report <installdir>/easybuild/pytorch-test-results.json',
         f'{PROG} report test-step.log --easyconfig {EC} --format markdown',
         f'{PROG} report */pytorch-test-results.json --suggest-policy --easyconfig {EC}'],
        ('reference', 'what-report-accepts-and-what-it-refuses')),
    'test-suite': (
        "Run a PyTorch source tree's test suites against an installed torch, outside EasyBuild, with the test "
        "step's runner, policy and reports: batches of suites at a time, timeouts, isolated reruns, resumable "
        "(the same command again runs only what is missing). Results and reports go to --results. Exit 0 on "
        "PASS, 1 on FAIL.",
        [f'{PROG} test-suite pytorch-v2.1.2 --python "$EBROOTPYTHON/bin/python3" --easyconfig {EC} '
         '--results ./pytorch-test-suite',
         f'{PROG} test-suite pytorch-v2.1.2 --python "$EBROOTPYTHON/bin/python3" --jobs 8 --results /shared/tests'],
        ('user-guide', 'one-builds-test-suites-spread-over-slurm-jobs')),
    'doctor': (
        'Predict "cannot open shared object file", "undefined symbol", wrong copies and executable stacks for '
        "the libraries of an installation, without running the loader: each load is simulated as glibc does "
        "it (RPATH, RUNPATH, ld.so.cache; LD_LIBRARY_PATH never searched). Exit 1 when a load fails or loads "
        "the wrong copy.",
        [f'{PROG} doctor $EBROOTPYTORCH',
         f'{PROG} doctor $EBROOTPYTORCH --from {LIB} --executable "$EBROOTPYTHON/bin/python3" --format json'],
        ('reference', 'doctor-what-it-can-and-cannot-see')),
    'config': (
        "Print an EasyBuild configuration file that adds our easyblock, hooks and easyconfigs to the site's own "
        "configuration (read from EasyBuild: configuration files, $EASYBUILD_*), or with --env the same as "
        "export lines. A site's hooks file is kept, never replaced.",
        [f'{PROG} config > pytorch-cuda.cfg && eb --configfiles=pytorch-cuda.cfg {EC} --robot',
         f'eval "$({PROG} config --env)"',
         f'{PROG} config --entrypoints > pytorch-cuda.cfg    # EasyBuild 5'],
        ('user-guide', 'the-main-job-pytorch-212-foss-2023a-cuda-1211eb')),
    'demo': (
        "Build a cuDNN stand-in and a PyTorch-shaped package with real eb and Lmod, in a temporary prefix "
        "configured like EESSI (--rpath, --filter-env-vars=LD_LIBRARY_PATH), through our easyblock and hooks: "
        "test suite, install, NEEDED patch, sanity check with a real load, report; then the loader error the "
        "patch prevents. Under a minute, no GPU. With --site-hooks, EESSI's variables that its hooks file "
        "reads and the environment lacks are set to defaults the demo names.",
        [f'{PROG} demo',
         f'{PROG} demo --entrypoints --site-hooks $EESSI_SCRIPTS/eb_hooks.py    # EasyBuild 5'],
        ('user-guide', 'demo-one-command-under-a-minute-no-gpu')),
    'cudnn-catalog': (
        "List the cuDNN sub-libraries per cuDNN major version, which of them are added as NEEDED entries by "
        "default, and for which layouts they matter. Choose others per easyconfig (cudnn_needed) or per site "
        "($EB_PYTORCH_CUDA_CUDNN_NEEDED).",
        [f'{PROG} cudnn-catalog'],
        ('user-guide', 'use-with-easybuild-the-hooks')),
}


def about(command: str) -> Dict[str, Any]:
    """add_parser's keyword arguments for command: its description (wrapped here) and, as the epilog, its
    examples and documentation, kept as written (RawDescriptionHelpFormatter: an example stays one line, as a
    user copies it)."""
    description, examples, (page, section) = _ABOUT[command]
    epilog = 'examples:\n' + ''.join(f'  {example}\n' for example in examples) + \
        f'\ndocumentation: {docs_url(page, section)}'
    return {'description': textwrap.fill(description, WIDTH), 'epilog': epilog,
            'formatter_class': argparse.RawDescriptionHelpFormatter}


def commands() -> tuple:
    """The subcommands with a description, in the order cli.py defines them."""
    return tuple(_ABOUT)


def main_epilog() -> str:
    """The epilog of `eb-pytorch-cuda --help`."""
    return (f'"{PROG} COMMAND --help" describes a command, with examples.\n'
            f'exit codes: 0 success, 1 a check failed, 2 bad input (one line naming the file), 128+N signal N\n'
            f'documentation: {docs_url("index")}')
