"""A pytest plugin, loaded into the suite processes of a run_test.py call that runs beside other calls on its GPU
(run/gpu_share, through PYTEST_PLUGINS), that gives each process the share of the GPU's memory PyTorch's own rule
means to give a process of one call.

Why: PyTorch's harness shares a GPU among the processes of one run_test.py call: torch.testing._internal.
common_utils, imported with CUDA and NUM_PARALLEL_PROCS=n, caps the process's caching allocator at
round((GiB - n x 0.85) / GiB / n, 2) of the GPU (torch 2.6 common_utils.py:1535, the same in 2.11).  But run_test.py
2.6 sets NUM_PARALLEL_PROCS (run_test.py:2077) after it spawned its pool (:2004), so the suites its first NUM_PROCS
workers run (every suite of a call of up to 3) never see it (tests/test_gpu_share.py, on the real harness): beside
other calls, one such process may hold most of the GPU (on the H100, two held 37 and 35 GiB and a third process's
test failed out of memory with 27.75 MiB free: docs/validation/h100-2026-12-06-bench-gpu-gradgrad/).

So in every pytest session of such a call the plugin caps the process by common_utils' formula with n = the
processes of one call (EB_PYTORCH_CUDA_GPU_PROCESSES, the harness's pool size): the cap the harness means, never
less, since tests size their work by the whole GPU (a split over all the calls on it failed 22 attention tests of
test_transformers, 20 of which the plain call passed: docs/validation/h100-2026-12-07-bench-gpu-share-3gib/).  It
sets the cap when CUDA starts in the process (torch.cuda's queue of calls run at its lazy initialisation), or at
once where it has started: it never starts CUDA itself (a test that forks would lose its GPU), and a process that
never uses CUDA is left alone.  The session's header says it is armed and its terminal summary what it set (both
in the suite's log; a line written when CUDA starts, inside a test, would be that test's captured output).  It
imports nothing at module level but os and sys.
"""

import os
import sys

VARIABLE = 'EB_PYTORCH_CUDA_GPU_PROCESSES'  # n of common_utils' formula: the processes of one call
HARNESS_VARIABLE = 'NUM_PARALLEL_PROCS'  # run_test.py's, read by common_utils: said in what the plugin prints
OTHER_LIBRARIES_GIB = 0.85  # common_utils' own allowance a process ("other libraries take up ... under 1 GB")

_armed: list = []  # the header line, once per process
_said: list = []  # what the cap came to, for the terminal summary


def share(total_gib: float, processes: int) -> float:
    """The fraction of a GPU of total_gib each of `processes` suite processes of one call gets: common_utils'
    formula, not rounded to 2 places as common_utils rounds it (a cap a hundredth of the GPU under its own)."""
    return (total_gib - processes * OTHER_LIBRARIES_GIB) / total_gib / processes


def _cap(torch, processes: int) -> None:
    """Cap this process's allocator on its current GPU at its share, and say so in the summary; an error is said, not
    raised (torch would raise it from the test that started CUDA)."""
    try:
        _set_cap(torch, processes)
    except Exception as error:  # noqa: B902 - whatever it is, the test that started CUDA must not fail of it
        _said.append(f'eb-pytorch-cuda GPU share: none set ({type(error).__name__}: {error})')


def _set_cap(torch, processes: int) -> None:
    """_cap's work."""
    device = torch.cuda.current_device()
    total_gib = torch.cuda.get_device_properties(device).total_memory / 2 ** 30
    fraction = share(total_gib, processes)
    if fraction <= 0:
        _said.append(f'eb-pytorch-cuda GPU share: none set ({processes} processes leave nothing of '
                     f'{total_gib:.1f} GiB)')
        return
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    _said.append(f'eb-pytorch-cuda GPU share: {fraction:.4f} of {total_gib:.1f} GiB, {fraction * total_gib:.2f} GiB '
                 f'(the share of a call of {processes}; {HARNESS_VARIABLE}='
                 f'{os.environ.get(HARNESS_VARIABLE, "unset")})')


def _arm() -> str:
    """Cap this process now where CUDA has started, else when it starts; the header line."""
    processes = os.environ.get(VARIABLE, '')
    if not processes.isdigit() or int(processes) < 1:
        return f'eb-pytorch-cuda GPU share: none ({VARIABLE} is not a count)'
    torch = sys.modules.get('torch')
    queue = getattr(getattr(torch, 'cuda', None), '_lazy_call', None)
    if torch is None or queue is None:
        return 'eb-pytorch-cuda GPU share: none (no torch.cuda in this process)'
    started = torch.cuda.is_initialized()
    queue(lambda: _cap(torch, int(processes)))  # runs now where CUDA has started
    return (f'eb-pytorch-cuda GPU share: this process capped at the share of a call of {processes} '
            f'{"(CUDA had started)" if started else "when CUDA starts"}; '
            f'{HARNESS_VARIABLE}={os.environ.get(HARNESS_VARIABLE, "unset")}')


def pytest_configure(config):
    """Arm the cap before any test runs (the test file imported torch before pytest started)."""
    if not _armed:
        _armed.append(_arm())


def pytest_report_header(config):
    """The session's header: what is armed."""
    return list(_armed)


def pytest_terminal_summary(terminalreporter):
    """What the cap came to in this process: set (and at what), none set (why), or CUDA never started."""
    if not _armed or ' capped at the share of a call of ' not in _armed[0]:
        return
    for line in _said or ['eb-pytorch-cuda GPU share: none set (CUDA did not start in this process)']:
        terminalreporter.write_line(line)
