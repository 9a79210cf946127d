"""The public field results of PyTorch 2.1.2 on foss/2023a, per target, as run_test.py logs.

Each suite's failures are as the threads report them (tests/data/field/ holds the verbatim excerpts and
sources.json their URLs; read 2026-12-01): the count from EasyBuild's summary line, unnamed as there
(a traceback naming a test is posted beside the summary, not in it).
- aarch64: https://github.com/EESSI/software-layer/pull/444 (comment of 2024-01-13, CPU-only build)
- cascadelake, icelake, sapphirerapids: https://github.com/EESSI/software-layer/issues/461 (CPU-only build)
- V100 (7.0), A40 (8.6), A100 (8.0): https://github.com/easybuilders/easybuild-easyconfigs/issues/20222
- A100 (8.0, Xeon 8360Y icelake): https://github.com/easybuilders/easybuild-easyconfigs/pull/20156
"""

AARCH64 = [
    ('inductor/test_torchinductor', 1, []),  # PR 444's traceback names CpuTests.test_min_max_reduction_nan_cpu
    ('test_model_dump', 2, []),
    ('test_ops', 2, []),
    ('test_linalg', 2, []),
]
DYNAMO = [('dynamo/test_functions', 1, []), ('dynamo/test_dynamic_shapes', 2, [])]

FIELD = {
    'aarch64/generic': AARCH64,
    'aarch64/neoverse_n1': AARCH64,
    'aarch64/neoverse_v1': AARCH64 + [('test_scatter_gather_ops', 1, [])],
    'x86_64/intel/cascadelake': DYNAMO,
    'x86_64/intel/icelake': DYNAMO,
    'x86_64/intel/sapphirerapids': DYNAMO + [('test_proxy_tensor', 1, [])],
}
A100 = ('8.0', [
    ('test_jit', 1, []),  # PR 20156's traceback names TestScript.test_file_reader_no_memory_leak
    ('test_jit_legacy', 1, []), ('test_jit_profiling', 1, []), ('test_proxy_tensor', 1, []), ('test_nn', 1, []),
    ('distributed/fsdp/test_fsdp_core', 2, []), ('distributed/test_c10d_nccl', 1, []),
])
# the CUDA runs of issue 20222 (the CPU is not given: judged in x86_64/generic), label -> (cc, suites)
GPU = {
    'V100': ('7.0', [('inductor/test_compiled_autograd', 1, []), ('test_proxy_tensor', 1, []), ('test_nn', 1, [])]),
    'A40': ('8.6', [('test_jit', 1, []), ('test_proxy_tensor', 1, []), ('test_nn', 1, [])]),
    'A100-20222': ('8.0', [('test_optim', 2, []), ('test_nn', 1, [])]),
}
PASSING = ['test_autograd', 'test_torch']


def suite_log(suite, failed, names, passed=100):
    """One suite as run_test.py prints it: pytest's FAILED lines (where named), its summary, the failed! line."""
    module = suite + '.py'
    lines = [f'Running {suite} 1/1 ... [2024-01-12 23:00:00.000000]']
    lines += [f'FAILED [0.0100s] {module}::{name.replace(".", "::")} - AssertionError' for name in names]
    summary = f'{failed} failed, {passed} passed, 3 skipped, {2 * failed} rerun' if failed else f'{passed} passed'
    lines.append(f'========== {summary} in 12.34s ==========')
    if failed:
        lines.append(f'{suite} 1/1 failed!')
    return '\n'.join(lines) + '\n'


def run_log(suites, extra=()):
    """A whole run_test.py log: the given failing suites, extra ones, and two passing suites."""
    return ''.join(suite_log(*suite) for suite in list(suites) + list(extra)) + \
        ''.join(suite_log(name, 0, []) for name in PASSING)
