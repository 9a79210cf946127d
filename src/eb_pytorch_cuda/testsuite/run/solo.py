"""Run the test suites here (not over Slurm): batches, and a suite alone when its batch was killed.

A ten-hour test step must survive a hanging multiprocess test and a killed `eb`.  Suites run in
batches through run_test.py itself (run/batches: its pool and serial list apply, no per-suite start-up
cost), each batch in its own process group killed at the sum of its suites' timeouts; a suite its
killed batch did not finish runs again alone (run_suite) with its own timeout.  Each suite's outcome
(results/outcome: exit state, log, XML reports) goes to the build's run/store as its batch ends.
"""

import os
import subprocess
import time
from dataclasses import asdict

from eb_pytorch_cuda import process
from eb_pytorch_cuda.testsuite.run import batches
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.run.gpus import gpu_count
from eb_pytorch_cuda.testsuite.results.splitting import split_batch_output
from eb_pytorch_cuda.testsuite.run.command import harness_environment
from eb_pytorch_cuda.testsuite.run.harness import harness_of
from eb_pytorch_cuda.testsuite.results.outcome import build_outcome, remove_reports

DEFAULT_TIMEOUT = 3 * 3600  # PyTorch's slowest suites take well under an hour on a build node
OUTPUT_KEPT = batches.OUTPUT_KEPT


def run_suite(command, suite, timeout, output_dir, env, gpu=None):
    """Run one suite alone (`run_test.py -i suite`) in its own process group; return its record."""
    harness = harness_of(command.cwd)
    remove_reports(command.cwd, suite)
    argv = discovery.run_argv(command.argv, [suite],
                              batches.batch_options(harness, batches.xml_reports_safe(harness, command, env)))
    output_path = os.path.join(output_dir, suite.replace('/', '.') + '.log')
    start = time.time()
    with open(output_path, 'w') as output:
        code, killed = process.run(argv, timeout=timeout, cwd=command.cwd, env=batches.batch_env(env, gpu),
                                   stdout=output, stderr=subprocess.STDOUT)
        timed_out = f'timeout after {timeout}s' if killed else None
    with open(output_path, errors='replace') as handle:
        text = handle.read()
    out = split_batch_output(text, [suite], command.cwd)[suite]
    failed = out.failed or (code != 0 and timed_out is None)
    result, exit_code, notes = build_outcome(suite, out.text or text, True, failed, out.signal, timed_out,
                                             command.cwd)
    result.seconds = round(time.time() - start, 1)
    return {'suite': asdict(result), 'exit_code': code if timed_out is None else None, 'seconds': result.seconds,
            'gpu': gpu, 'notes': notes, 'output_tail': text[-OUTPUT_KEPT:], 'output_file': output_path}


def run_all(command, suites, store, output_dir, env, timeout_for, parallel=1, progress=None, harness=None,
            batch_size=batches.DEFAULT_BATCH_SIZE):
    """Run every suite not already in the store, in batches; return (RunResult of all, [suites run now])."""
    harness = harness or harness_of(command.cwd)
    env = harness_environment(env, command)  # also for callers other than step.run_suites
    gpus = gpu_count(env) if parallel > 1 else []
    todo = batches.run_batches(command, suites, store, output_dir, env, timeout_for, harness, parallel, progress,
                               gpus, solo=lambda suite, timeout: run_suite(command, suite, timeout, output_dir, env),
                               batch_size=batch_size)
    return store.result(suites), todo
