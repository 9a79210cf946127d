"""The test step of a PyTorch build, EasyBuild-free: what the easyblock's test_step delegates to.

Given the test command, its environment and the policy, it runs the suites (per-suite processes,
stored results, reruns), decides what to keep when only the verdict failed, and computes the build
fingerprint and per-suite timeouts.  The easyblock supplies EasyBuild's facts and prints.
"""

import hashlib
import json
import os
import shutil

from eb_pytorch_cuda.testsuite.run import batches
from eb_pytorch_cuda.testsuite.run import discovery
from eb_pytorch_cuda.testsuite.run.reruns import rerun_failures
from eb_pytorch_cuda.testsuite.policy import settings
from eb_pytorch_cuda.testsuite.run import solo
from eb_pytorch_cuda.testsuite.run.command import harness_environment
from eb_pytorch_cuda.testsuite.run.harness import harness_of
from eb_pytorch_cuda.testsuite.policy.judging import judge

# parameters that decide how a run is judged or scheduled, not what is built and tested: left out of the fingerprint
POLICY_PARAMETERS = settings.JUDGING
FLAG_VARIABLES = ('CFLAGS', 'CXXFLAGS', 'LDFLAGS', 'TORCH_CUDA_ARCH_LIST')


def build_fingerprint(easyconfig_values, environ, extra=None):
    """sha256 of what the tested build depends on: the easyconfig's parameters without the policy ones,
    the compiler flags, and extra facts (e.g. the CUDA compute capabilities)."""
    values = {k: v for k, v in easyconfig_values.items() if k not in POLICY_PARAMETERS}
    flags = {name: environ.get(name, '') for name in FLAG_VARIABLES}
    text = json.dumps({'easyconfig': values, 'flags': flags, 'extra': extra or {}}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def suite_timeouts(explicit, previous_results):
    """{suite: seconds}, '' for the rest: the explicit value, else 4x (at least 10 min) each suite's time in
    a previous results JSON, else solo.DEFAULT_TIMEOUT."""
    if explicit:
        return {'': int(explicit)}
    timeouts = {'': solo.DEFAULT_TIMEOUT}
    try:
        with open(previous_results) as handle:
            for suite, seconds in json.load(handle).get('suite_seconds', {}).items():
                timeouts[suite] = max(600, int(4 * seconds))
    except (OSError, ValueError, AttributeError, TypeError):
        pass
    return timeouts


def run_suites(command, env, store, output_dir, python, timeouts, parallel=1, reruns=0, progress=None,
               batch_size=batches.DEFAULT_BATCH_SIZE, jobs=1, previous_results=None, tested_installation=None):
    """Discover and run every suite not yet in store (in batches through run_test.py, or with jobs > 1 on
    that many Slurm jobs: testsuite/spread), then rerun failures in isolation; return the RunResult.
    previous_results (a results JSON) orders the spread longest first; tested_installation must then be on
    a path the jobs see."""
    progress = progress or (lambda message: None)
    with store.exclusive():  # one run per store: a second one refuses in one line naming the directory
        if store.notice is None:
            store.notice = progress  # each store line set aside is said once, naming the file and the line
        return _run_suites(command, env, store, output_dir, python, timeouts, parallel, reruns, progress,
                           batch_size, jobs, previous_results, tested_installation)


def _run_suites(command, env, store, output_dir, python, timeouts, parallel, reruns, progress, batch_size, jobs,
                previous_results, tested_installation):
    env = harness_environment(env, command)
    harness = harness_of(command.cwd)
    if not batches.xml_reports_safe(harness, command, env):
        progress(f"XML reports off: the suites run under unittest and {command.argv[0]} cannot import xmlrunner "
                 f"(unittest-xml-reporting), which --save-xml needs; results come from the log only")
    if int(jobs) > 1:
        from eb_pytorch_cuda.testsuite.spread import controller  # only a spread build needs Slurm's side
        return controller.run_spread(command, env, store, output_dir, python, timeouts, int(jobs), parallel=parallel,
                                     reruns=reruns, previous_seconds=controller.previous_suite_seconds(
                                         previous_results),
                                     tested_installation=tested_installation, progress=progress)
    suites, listed_serial = discovery.discover(command, env)
    if listed_serial is not None:
        harness.serial |= listed_serial  # what this very harness says it runs alone
    progress(f"running {len(suites)} suites: {' '.join(discovery.run_argv(command.argv, ['<suites>']))} in "
             f"{command.cwd}, in batches of up to {batch_size} (run_test.py's own pool and serial list apply; "
             f"{parallel} batch(es) at a time; outputs in {output_dir}; results kept in {store.path})")
    timeout_of = lambda suite: timeouts.get(suite, timeouts[''])  # noqa: E731 - a one-line lookup
    result, _ran = solo.run_all(command, suites, store, output_dir, env, timeout_of, parallel, progress,
                                harness, batch_size)
    rerun_failures(result, command, python, env, reruns, timeout_of, progress, harness)
    return result


def notes(store) -> dict:
    """{suite: [notes]} of the suites stored for this build: a pass with 0 tests, log and XML disagreeing."""
    return {suite: record['notes'] for suite, record in sorted(store.load().items()) if record.get('notes')}


def judge_and_keep(store, result, policy, tested_installation):
    """The verdict of result; when the policy fails the run, its result and tested installation are kept
    for a re-judging that neither runs a suite nor rebuilds."""
    verdict = judge(result, policy)
    if not verdict.passed:
        keep(store, result, tested_installation)
    return verdict


def keep(store, result, tested_installation):
    """Keep result and the tested installation (for a run that failed on its verdict only)."""
    store.save_final(result)
    if os.path.isdir(store.cache_dir):
        shutil.rmtree(store.cache_dir)
    shutil.copytree(tested_installation, store.cache_dir, symlinks=True)
