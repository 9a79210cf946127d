"""One build's test suites spread over several jobs of a real Slurm (tests/slurm_cluster.py: one node,
several one-CPU job slots), against the same suites run serially.

The suites are the stand-in harness's (src/eb_pytorch_cuda/standins/torch/test/: a known failure, a
crash, a hang, a flaky test) plus sleeping suites: stand-ins because a hang, a crash and a job killed
mid-suite cannot be shown with PyTorch's own suites in a test that must stay short.  The queue's claim
race runs real processes on a real directory; the refusal of node-local paths reads the real mounts.
"""

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time

import pytest
from environment import REAL_PYTHON
from helpers import comparable, real_tree, standin_test_tree
from procs import stop_what_runs

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.spread import slurm
from eb_pytorch_cuda.testsuite.spread import controller
from eb_pytorch_cuda.testsuite.run.executor import execute
from eb_pytorch_cuda.testsuite.run.here import HereExecutor
from eb_pytorch_cuda.testsuite.run.plan import PieceRule, RunRequest
from eb_pytorch_cuda.testsuite.run.store import ResultStore
from eb_pytorch_cuda.testsuite.run.command import TestCommand as Command  # not a pytest test class
from eb_pytorch_cuda.testsuite.policy.judging import judge
from eb_pytorch_cuda.testsuite.spread.workqueue import SuiteQueue, longest_first, worker_id

SLEEPER = '''import time
import unittest

from common import run_tests


class TestSleeps(unittest.TestCase):
    def test_sleep(self):
        time.sleep({seconds})

    def test_other(self):
        self.assertTrue(True)


if __name__ == '__main__':
    run_tests(__file__)
'''
HANG_TIMEOUT = 6


def _tree(root, sleepers=4, seconds=2, keep=('test_known_failure', 'test_crash', 'test_hang', 'test_cudnn')):
    """A fresh copy of the stand-in test tree (helpers.standin_test_tree) with its suites in keep and sleepers
    suites that sleep seconds."""
    test_dir = standin_test_tree(root, keep)
    for index in range(sleepers):
        (test_dir / f'test_sleep_{index}.py').write_text(SLEEPER.format(seconds=seconds))
    return test_dir


def _command(test_dir):
    return Command(str(test_dir), {}, [sys.executable, 'run_test.py'])


def _policy():
    from eb_pytorch_cuda.testsuite.policy.judging import Policy
    return Policy(max_failed_tests=0)


def _timeouts():
    return {'': 120, 'test_hang': HANG_TIMEOUT}


def _serial(tmp_path):
    test_dir = _tree(tmp_path / 'serial')
    command, env = _command(test_dir), dict(os.environ)
    store = ResultStore(str(tmp_path / 'serial-results' / 'r.jsonl'), 'build-a')
    timeouts = _timeouts()
    return execute(HereExecutor(), RunRequest(command, env, str(tmp_path / 'serial-out'), sys.executable, timeouts),
                   store)[1]


def _run_spread(command, env, store, output_dir, python, timeouts, jobs, suites=None, previous_seconds=None,
                progress=None, **options):
    """What service.run_suites does with jobs > 1 (controller.SlurmExecutor), without its store lock, signal
    handlers (they need the main thread) and reruns."""
    spread = controller.SpreadOptions(pieces=PieceRule(previous_seconds or {}), **options)
    return execute(controller.SlurmExecutor(jobs, spread, progress),
                   RunRequest(command, env, output_dir, python, timeouts, units=suites), store)[1]


def _spread(tmp_path, jobs, lines, name='spread', **kwargs):
    test_dir = _tree(tmp_path / name, **{k: kwargs.pop(k) for k in ('sleepers', 'seconds') if k in kwargs})
    store = ResultStore(str(tmp_path / f'{name}-results' / 'r.jsonl'), 'build-a')
    result = _run_spread(_command(test_dir), dict(os.environ), store, str(tmp_path / f'{name}-out'),
                         sys.executable, _timeouts(), jobs, shared_paths=[str(tmp_path)],
                         slurm_settings={'cpus_per_job': 1}, progress=lines.append, poll=1, **kwargs)
    return result, store


def _workers(store):
    """The workers (job.host.pid) whose results file holds an outcome."""
    directory = os.path.join(controller.queue_dir_of(store), 'results')
    return {name[:-len('.jsonl')] for name in os.listdir(directory) if os.path.getsize(os.path.join(directory, name))}


def test_stand_in_suites_spread_over_three_jobs_give_the_serial_verdict_and_counts(slurm, tmp_path):
    serial = _serial(tmp_path)
    lines = []
    spread_result, store = _spread(tmp_path, 3, lines)
    assert comparable(spread_result) == comparable(serial)
    assert spread_result.suites['test_hang'].status == 'timed out'
    assert spread_result.suites['test_crash'].status == 'terminated'
    assert spread_result.suites['test_known_failure'].status == 'failed'
    assert judge(spread_result, _policy()).passed == judge(serial, _policy()).passed is False
    assert judge(spread_result, _policy()).reasons == judge(serial, _policy()).reasons
    assert len({worker.split('.')[0] for worker in _workers(store)}) >= 2  # the suites really went to several jobs
    assert set(store.load()) == set(serial.suites)  # every outcome is in the build's store, as in a serial run
    assert lines[0].startswith('running 9 suites on 3 Slurm job(s) (--cpus-per-task 1;')
    assert lines[-1] == 'suites 9/9 done on 3 job(s); 4 failed'
    assert any(line.startswith('suites ') and 'failed so far' in line for line in lines)
    # a rerun of the same build runs nothing and gives the same result (resume is reading the store)
    again = _run_spread(_command(tmp_path / 'spread' / 'test'), dict(os.environ), store,
                        str(tmp_path / 'spread-out'), sys.executable, _timeouts(), 3,
                        shared_paths=[str(tmp_path)], progress=lines.append, poll=1)
    assert comparable(again) == comparable(serial)
    after_first = lines[lines.index('suites 9/9 done on 3 job(s); 4 failed') + 1:]
    assert not any(line.startswith('running') for line in after_first)
    controller.remove_queue(store)  # what the test step does with the store once the build passed
    assert not os.path.exists(controller.queue_dir_of(store)) and set(store.load()) == set(serial.suites)


def test_a_job_killed_with_scancel_mid_suite_loses_nothing(slurm, tmp_path):
    lines = []
    queue_dir = tmp_path / 'spread-results' / 'r.jsonl.queue-build-a'
    killed = {}

    def kill_a_job_running_a_suite():
        deadline = time.time() + 600
        while time.time() < deadline and not killed:
            claims = os.listdir(queue_dir / 'claims') if (queue_dir / 'claims').is_dir() else []
            done = os.listdir(queue_dir / 'done') if (queue_dir / 'done').is_dir() else []
            for name in claims:
                suite = name.rpartition('~')[0]
                if name.startswith('.') or not suite.startswith('test_sleep') or suite in done:
                    continue
                holder = SuiteQueue(str(queue_dir)).claims()[suite][1]
                job = holder.split('.')[0] if holder else None
                # cancelled while the suite runs, because it is stopped there (a fixed second's sleep let a
                # loaded machine's suite not start yet, or finish first)
                if job and stop_what_runs(job, f'{suite}.py', lambda: (queue_dir / 'done' / suite).exists()):
                    killed.update(job=job, suite=suite)
                    subprocess.run(['scancel', job], check=True)
                    return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_a_job_running_a_suite)
    killer.start()
    result, store = _spread(tmp_path, 2, lines, sleepers=6, seconds=4)
    killer.join()
    assert killed, 'no job was seen running a suite'
    assert set(result.suites) == set(store.load()) and len(result.suites) == 11
    assert result.suites[killed['suite']].status == 'passed'  # rerun to the end by another job
    finisher = (queue_dir / 'done' / killed['suite']).read_text().strip()  # the results file that holds it
    assert not finisher.startswith(killed['job'] + '.')
    # the job's whole claim (one run_test.py call: the killed suite and the others claimed with it) goes back
    back = [line for line in lines if line.startswith(f"job {killed['job']} ended with ")]
    assert len(back) == 1 and back[0].endswith('back in the queue'), lines
    assert killed['suite'] in back[0].rsplit('(', 1)[1].split(')')[0].split(', '), back
    assert os.path.exists(queue_dir / 'dead' / killed['job'])


def test_a_node_local_results_path_is_refused_before_anything_is_submitted(tmp_path):
    test_dir = _tree(tmp_path, sleepers=0)
    store = ResultStore(str(tmp_path / 'results' / 'r.jsonl'), 'build-a')
    env = {k: v for k, v in os.environ.items() if k != slurm.SHARED_PATHS_VARIABLE}
    with pytest.raises(PluginError) as raised:
        _run_spread(_command(test_dir), env, store, str(tmp_path / 'out'), sys.executable, _timeouts(), 2,
                    environ=env)
    message = str(raised.value)
    assert message == (f"{tmp_path / 'results'}: the results directory is node-local (under /tmp); the jobs on other "
                       f"nodes cannot see it: use a path all nodes see, or add it to $EB_PYTORCH_CUDA_SHARED_PATHS if "
                       f"it is shared")
    assert '\n' not in message
    assert not os.path.exists(controller.queue_dir_of(store)) and not (tmp_path / 'out').exists()


def test_a_path_on_a_local_file_system_type_is_refused_unless_configured_as_shared(tmp_path):
    local = os.path.expanduser('~')  # the root file system here: ext4 or overlay, node-local
    point, fstype = slurm._mount_of(os.path.realpath(local))
    assert fstype in slurm.LOCAL_FS_TYPES
    with pytest.raises(PluginError, match=f'on a node-local file system \\({fstype} at {point}\\)'):
        slurm.refuse_node_local(local, 'the tested installation', environ={})
    slurm.refuse_node_local(local, 'the tested installation', environ={slurm.SHARED_PATHS_VARIABLE: local})
    slurm.refuse_node_local(str(tmp_path / 'x'), 'the results directory', shared=[str(tmp_path)], environ={})
    with pytest.raises(PluginError, match='under /dev/shm'):
        slurm.refuse_node_local('/dev/shm/build', 'the results directory', environ={})


def test_a_job_option_slurm_refuses_is_one_line_naming_sbatch_and_the_reason(slurm, tmp_path):
    test_dir = _tree(tmp_path / 'tree', sleepers=1, seconds=0, keep=())
    store = ResultStore(str(tmp_path / 'results' / 'r.jsonl'), 'build-a')
    with pytest.raises(PluginError) as raised:
        _run_spread(_command(test_dir), dict(os.environ), store, str(tmp_path / 'out'), sys.executable,
                    {'': 60}, 2, shared_paths=[str(tmp_path)],
                    slurm_settings={'partition': 'no-such-partition'})
    assert str(raised.value).startswith('sbatch: refused the job (exit 1): sbatch: error: ')
    assert 'invalid partition' in str(raised.value).lower() and '\n' not in str(raised.value)
    assert store.load() == {}


def _claim_all(queue_dir, job, out):
    """A worker process that claims until nothing is left (no suite is run): what it got goes to out."""
    queue = SuiteQueue(queue_dir)
    worker = worker_id(job)
    queue.heartbeat(worker)
    got = []
    while True:
        suite = queue.claim_next(worker)
        if suite is None:
            break
        got.append(suite)
    out.put(got)


def test_concurrent_claims_hand_each_suite_to_exactly_one_worker(tmp_path):
    suites = [f'dir/test_{index:03d}' for index in range(200)]
    SuiteQueue(str(tmp_path / 'q')).create({'fingerprint': 'f'}, suites)
    out = multiprocessing.get_context('fork').Queue()
    workers = [multiprocessing.get_context('fork').Process(target=_claim_all, args=(str(tmp_path / 'q'), str(job), out))
               for job in range(6)]
    for process in workers:
        process.start()
    got = [out.get(timeout=60) for _ in workers]
    for process in workers:
        process.join()
    claimed = [suite for part in got for suite in part]
    assert sorted(claimed) == sorted(suites)  # every suite once, none twice
    assert sum(1 for part in got if part) >= 2


def test_a_claim_of_a_dead_worker_goes_back_and_is_taken_by_exactly_one(tmp_path):
    queue = SuiteQueue(str(tmp_path / 'q'), stale_after=3600)
    queue.create({'fingerprint': 'f'}, ['test_a', 'test_b'])
    first, second, third = worker_id('101'), worker_id('102'), worker_id('103')
    for worker in (first, second, third):
        queue.heartbeat(worker)
    assert queue.claim_next(first) == 'test_a'
    assert queue.claim_next(second) == 'test_b'
    assert queue.claim_next(third) is None  # both held by live workers
    queue.mark_dead('101')  # its job left Slurm
    assert queue.running() == {'test_b': second}
    assert queue.claim_next(third) == 'test_a'
    assert queue.claim_next(second) is None  # claim 2 of test_a is third's now
    os.utime(queue.path('workers', second), (time.time() - 7200, time.time() - 7200))  # heartbeat 2 h old
    assert queue.claim_next(third) == 'test_b'


def test_suites_are_handed_out_longest_expected_first_unknown_ones_before():
    expected = {'test_nn': 1800.0, 'test_fast': 2.0, 'test_torch': 2400.0}
    assert longest_first(['test_fast', 'test_new', 'test_nn', 'test_torch'], expected) == \
        ['test_new', 'test_torch', 'test_nn', 'test_fast']


def test_job_options_come_from_settings_then_our_variables_then_easybuilds():
    environ = {'EB_PYTORCH_CUDA_SLURM_PARTITION': 'gpu', 'EB_PYTORCH_CUDA_SLURM_GPUS_PER_JOB': '4',
               'EB_PYTORCH_CUDA_SLURM_EXTRA_OPTIONS': '--account=proj --qos "high prio"',
               'EASYBUILD_JOB_CORES': '16', 'EASYBUILD_JOB_MAX_WALLTIME': '24'}
    options = slurm.job_options({'partition': 'a100', 'time_limit': None}, environ)
    assert options.sbatch_options() == ['--partition', 'a100', '--gres=gpu:4', '--cpus-per-task', '16',
                                        '--time', '1440', '--account=proj', '--qos', 'high prio']
    argv = slurm.sbatch_argv(options, '/shared/q/worker-job.py', '/shared/q', 'pytorch-tests-1', '/shared/q/o')
    assert argv[:2] == ['sbatch', '--parsable'] and argv[-2:] == ['/shared/q/worker-job.py', '/shared/q']
    with pytest.raises(PluginError, match='not a number'):
        slurm.job_options({}, {'EB_PYTORCH_CUDA_SLURM_GPUS_PER_JOB': 'four'})


SUBMITTER = '''import os, sys
from eb_pytorch_cuda.testsuite.spread import controller
from eb_pytorch_cuda.testsuite.run.command import TestCommand
from eb_pytorch_cuda.testsuite.run.executor import execute
from eb_pytorch_cuda.testsuite.run.plan import RunRequest
from eb_pytorch_cuda.testsuite.run.store import ResultStore
test_dir, store_path, out, shared = sys.argv[1:5]
spread = controller.SpreadOptions(shared_paths=[shared], slurm_settings={'cpus_per_job': 1}, poll=0.5)
execute(controller.SlurmExecutor(2, spread), RunRequest(TestCommand(test_dir, {}, [sys.executable, 'run_test.py']),
        dict(os.environ), out, sys.executable, {'': 120}), ResultStore(store_path, 'build-a'))
'''


def test_rerunning_after_the_submitting_eb_was_killed_resumes_and_cancels_its_jobs(slurm, tmp_path):
    test_dir = _tree(tmp_path / 'tree', sleepers=6, seconds=3, keep=())
    store_path = tmp_path / 'results' / 'r.jsonl'
    run_log = tmp_path / 'suites-run.log'
    env = dict(os.environ, STANDIN_RUN_LOG=str(run_log))
    submitter = subprocess.Popen([sys.executable, '-c', SUBMITTER, str(test_dir), str(store_path),
                                  str(tmp_path / 'out'), str(tmp_path)], env=env)
    done_dir = tmp_path / 'results' / 'r.jsonl.queue-build-a' / 'done'
    deadline = time.time() + 120
    while time.time() < deadline and not (done_dir.is_dir() and len(os.listdir(done_dir)) >= 2):
        time.sleep(0.2)
    submitter.kill()  # eb killed: no cleanup, its two jobs go on
    submitter.wait()
    finished_before = {name.replace('%2F', '/') for name in os.listdir(done_dir)}
    left_jobs = (tmp_path / 'results' / 'r.jsonl.queue-build-a' / 'jobs').read_text().split()
    assert len(finished_before) >= 2 and len(left_jobs) == 2
    lines = []
    store = ResultStore(str(store_path), 'build-a')
    result = _run_spread(_command(test_dir), env, store, str(tmp_path / 'out'), sys.executable, {'': 120}, 2,
                         shared_paths=[str(tmp_path)], slurm_settings={'cpus_per_job': 1},
                         progress=lines.append, poll=0.5)
    assert set(result.suites) == {f'test_sleep_{i}' for i in range(6)} | {'distributed/test_c10d_standin'}
    assert all(suite.status == 'passed' for suite in result.suites.values())
    resumed = next(line for line in lines if line.startswith('resuming: '))
    assert resumed.endswith('(cancelled 2 job(s) left by the previous run)')
    assert controller.slurm.live_jobs(left_jobs) == set()  # `slurm` is the fixture here
    runs = run_log.read_text().split()
    assert all(runs.count(suite) == 1 for suite in finished_before)  # measured once, never again


def test_two_targets_of_one_easyconfig_each_spread_their_own_suites_at_once(slurm, tmp_path):
    """EESSI builds one easyconfig per CPU target, with the same build path and results file name; their
    fingerprints differ (compiler flags), and so do their queues and jobs."""
    store_path = str(tmp_path / 'results' / 'PyTorch-2.1.2.jsonl')
    results, lines = {}, {}

    def build(target):
        test_dir = _tree(tmp_path / target, sleepers=2, seconds=1, keep=('test_known_failure',))
        lines[target] = []
        store = ResultStore(store_path, f'fingerprint-{target}')
        output = str(tmp_path / f'{target}-out')
        results[target] = _run_spread(_command(test_dir), dict(os.environ), store, output,
                                      sys.executable, {'': 120}, 2, shared_paths=[str(tmp_path)],
                                      slurm_settings={'cpus_per_job': 1}, progress=lines[target].append,
                                      poll=0.5)

    threads = [threading.Thread(target=build, args=(target,)) for target in ('haswell', 'grace')]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = {'test_known_failure', 'test_sleep_0', 'test_sleep_1', 'distributed/test_c10d_standin'}
    for target in ('haswell', 'grace'):
        assert set(results[target].suites) == expected
        assert results[target].suites['test_known_failure'].status == 'failed'
        assert set(ResultStore(store_path, f'fingerprint-{target}').load()) == expected
        assert lines[target][-1] == 'suites 4/4 done on 2 job(s); 1 failed'
    queues = sorted(name for name in os.listdir(tmp_path / 'results') if '.queue-' in name)
    assert queues == ['PyTorch-2.1.2.jsonl.queue-fingerprint-grac', 'PyTorch-2.1.2.jsonl.queue-fingerprint-hasw']


KILLS_ITS_JOB = '''"""Takes its node down (like a suite that makes the node run out of memory): cancels its own job."""
import os
import subprocess
import time

subprocess.run(['scancel', os.environ['SLURM_JOB_ID']])
time.sleep(60)
'''


def test_a_suite_whose_job_always_dies_is_recorded_never_finished(slurm, tmp_path):
    test_dir = _tree(tmp_path / 'tree', sleepers=3, seconds=1, keep=())
    (test_dir / 'test_kills_its_job.py').write_text(KILLS_ITS_JOB)
    store = ResultStore(str(tmp_path / 'results' / 'r.jsonl'), 'build-a')
    lines = []
    result = _run_spread(_command(test_dir), dict(os.environ), store, str(tmp_path / 'out'), sys.executable,
                         {'': 120}, 2, shared_paths=[str(tmp_path)], slurm_settings={'cpus_per_job': 1},
                         progress=lines.append, poll=0.5, max_attempts=2)
    killer = result.suites['test_kills_its_job']
    assert killer.status == 'no summary'
    assert killer.signal == 'its Slurm job ended 2 times while running it (node failure, time limit, scancel)'
    assert all(result.suites[f'test_sleep_{i}'].status == 'passed' for i in range(3))
    assert 'test_kills_its_job: its job ended before it finished, 2 times: recorded as never finished' in lines
    verdict = judge(result, _policy())
    assert not verdict.passed and [entry[0] for entry in verdict.unjudgeable] == ['test_kills_its_job']


REAL_SUITES = ['test_license', 'test_type_info']  # quick ones: each run_test.py call imports torch 3 times


def test_real_pytorch_harness_suites_spread_over_two_jobs_give_the_serial_results(harness26, slurm, tmp_path):
    """PyTorch's own run_test.py (2.6.0, Debian's source package) with torch 2.6.0: two real suites."""
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'CI')}
    serial_dir = real_tree(tmp_path / 'serial')
    command = Command(str(serial_dir), {}, [REAL_PYTHON, 'run_test.py'])
    serial_store = ResultStore(str(tmp_path / 'serial-results' / 'r.jsonl'), 'real')
    _plan, serial = execute(HereExecutor(), RunRequest(command, env, str(tmp_path / 'serial-out'), REAL_PYTHON,
                                                       {'': 900}, units=REAL_SUITES), serial_store)
    spread_dir = real_tree(tmp_path / 'spread')
    store = ResultStore(str(tmp_path / 'spread-results' / 'r.jsonl'), 'real')
    lines = []
    result = _run_spread(Command(str(spread_dir), {}, [REAL_PYTHON, 'run_test.py']), env, store,
                         str(tmp_path / 'spread-out'), REAL_PYTHON, {'': 900}, 2, suites=REAL_SUITES,
                         previous_seconds=dict.fromkeys(REAL_SUITES, 600),  # one claim each
                         shared_paths=[str(tmp_path)], slurm_settings={'cpus_per_job': 1},
                         progress=lines.append, poll=1)
    assert comparable(result) == comparable(serial)
    assert all(suite.status == 'passed' and suite.counts['passed'] > 0 for suite in result.suites.values())
    assert lines[-1] == 'suites 2/2 done on 2 job(s); 0 failed'
    assert len({worker.split('.')[0] for worker in _workers(store)}) >= 2


def test_the_worker_on_a_directory_that_is_no_queue_says_so_in_one_line_and_exits_2(tmp_path):
    done = subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda.testsuite.spread.worker', str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ''
    assert done.stderr == (f"eb_pytorch_cuda.testsuite.spread.worker: {tmp_path / 'spec.json'}: not a suite queue "
                           f"([Errno 2] No such file or directory: '{tmp_path / 'spec.json'}')\n")


def _test_suite_cli(source, results, *extra, env=None):
    done = subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda', 'test-suite', str(source), '--python',
                           sys.executable, '--results', str(results), '--format', 'json', '--timeout', '120', *extra],
                          capture_output=True, text=True, env=env, timeout=600)
    return done, json.loads(done.stdout) if done.stdout.strip().startswith('{') else None


def test_test_suite_with_jobs_gives_the_verdict_of_the_same_run_here(slurm, tmp_path):
    """`eb-pytorch-cuda test-suite ... --jobs 2` (what the easyblock's test_suite_jobs calls: step.run_suites
    with jobs > 1) spreads the suites over real Slurm jobs; the report equals the one run on this node."""
    keep = ('test_known_failure', 'test_flaky')
    here_src, spread_src = tmp_path / 'here', tmp_path / 'spread'
    _tree(here_src, sleepers=2, seconds=1, keep=keep)
    _tree(spread_src, sleepers=2, seconds=1, keep=keep)
    env = dict(os.environ, EB_PYTORCH_CUDA_SHARED_PATHS=str(tmp_path))  # one node: its tmp is "shared"
    here, here_report = _test_suite_cli(here_src, tmp_path / 'here-results', env=env)
    spread_done, spread_report = _test_suite_cli(spread_src, tmp_path / 'spread-results', '--jobs', '2', env=env)
    assert here.returncode == spread_done.returncode, (here.stderr[-2000:], spread_done.stderr[-2000:])
    assert here_report is not None and spread_report is not None
    assert 'Slurm job(s)' in spread_done.stderr and 'Slurm job' not in here.stderr

    def comparable(report):
        return sorted((suite['name'], suite['status'], suite['counts'].get('failed', 0)) for suite in report['suites'])
    assert comparable(spread_report) == comparable(here_report)
    assert {suite['name'] for suite in spread_report['suites']} == {
        'test_known_failure', 'test_flaky', 'test_sleep_0', 'test_sleep_1', 'distributed/test_c10d_standin'}
    assert spread_report['failed_tests'] == here_report['failed_tests'] == 2
    assert spread_report['verdict'] == here_report['verdict']


def test_test_suite_command_refuses_a_node_local_results_path_for_jobs(tmp_path):
    source = tmp_path / 'src'
    _tree(source, sleepers=1, seconds=1, keep=())
    env = {k: v for k, v in os.environ.items() if k != 'EB_PYTORCH_CUDA_SHARED_PATHS'}
    done, _report = _test_suite_cli(source, tmp_path / 'results', '--jobs', '2', env=env)
    assert done.returncode == 2 and 'node' in done.stderr.strip().splitlines()[-1], done.stderr[-2000:]


def test_a_must_serial_suite_runs_alone_in_its_job_while_the_others_share_its_slots(tmp_path):
    """The worker a job runs, in this process (no Slurm needed for what happens inside one job): 3 slots,
    one suite on the harness's must-serial list; real processes, the stand-in's sleeping suites."""
    from eb_pytorch_cuda.testsuite.spread import worker
    test_dir = _tree(tmp_path / 'tree', sleepers=4, seconds=2, keep=())
    queue_dir = str(tmp_path / 'queue')
    SuiteQueue(queue_dir).create({'cwd': str(test_dir), 'argv': [sys.executable, 'run_test.py'],
                                  'env': dict(os.environ), 'timeouts': {'': 120}, 'output_dir': str(tmp_path / 'out'),
                                  'fingerprint': 'f', 'slots': 3, 'serial': ['test_sleep_2']},
                                 [f'test_sleep_{index}' for index in range(4)])
    events = []

    def log(line, flush=True):
        events.append((time.monotonic(), line))

    assert worker.work(queue_dir, 'job1.host.1', log=log) == 4
    spans = {}
    for when, line in events:
        if line.startswith('job1.host.1: running '):  # one line per run_test.py call, naming its suites
            for suite in line.split(': running ', 1)[1].split(' on GPU')[0].split():
                if suite != 'alone':
                    spans[suite] = [when, None, line]
        for suite in (f'test_sleep_{index}' for index in range(4)):
            if line.startswith(f'job1.host.1: {suite} passed'):
                spans[suite][1] = when
    assert spans['test_sleep_2'][2].endswith('running test_sleep_2 alone')
    # a claim's other suites shared one run_test.py call (no previous times: 1 minute each, 5 a claim)
    calls = [line for _, line in events if line.startswith('job1.host.1: running ') and not line.endswith(' alone')]
    assert any(len(line.split(': running ', 1)[1].split()) >= 2 for line in calls), calls
    outputs = list((tmp_path / 'out').glob('job1.host.1-*.log'))
    assert any(path.read_text().count('Running test_sleep_') >= 2 for path in outputs), outputs
    start, end, _ = spans['test_sleep_2']
    others = [spans[f'test_sleep_{index}'] for index in (0, 1, 3)]
    assert all(other_end <= start or other_start >= end for other_start, other_end, _ in others)
    # the other three shared the slots: some two of them ran at the same time
    assert any(a[0] < b[1] and b[0] < a[1] for a in others for b in others if a is not b)


def test_a_worker_whose_slot_breaks_stops_claiming_and_says_so_in_one_line(tmp_path):
    """A test command that cannot start (a real missing program): the slot's error stops the worker, which
    claims nothing more and exits with a one-line error; the queue keeps every suite unfinished."""
    from eb_pytorch_cuda.testsuite.spread import worker
    test_dir = _tree(tmp_path / 'tree', sleepers=3, seconds=1, keep=())
    queue_dir = str(tmp_path / 'queue')
    suites = [f'test_sleep_{index}' for index in range(3)]
    SuiteQueue(queue_dir).create({'cwd': str(test_dir), 'argv': [str(tmp_path / 'no-python'), 'run_test.py'],
                                  'env': dict(os.environ), 'timeouts': {'': 60}, 'output_dir': str(tmp_path / 'out'),
                                  'fingerprint': 'f', 'slots': 1, 'max_claim': 1}, suites)
    lines = []
    with pytest.raises(PluginError, match=r'worker job1\.host\.1 stopped after an error in one of its slots '
                                          r'\(FileNotFoundError'):
        worker.work(queue_dir, 'job1.host.1', log=lambda line, flush=True: lines.append(line))
    assert any('slot 0 failed, claiming no more suites' in line for line in lines)
    queue = SuiteQueue(queue_dir)
    assert queue.done() == set() and len(queue.claims()) == 1  # one claim made, then none
    assert worker.main([queue_dir]) == 2  # the command's exit: non-zero, one line


def test_a_spread_runs_heartbeat_names_the_claimed_suite_with_its_time(slurm, tmp_path):
    """The waiting loop of a spread run says the heartbeat's line (run/heartbeat) with what the live jobs hold:
    a stand-in suite that sleeps 10 s, in one job, with the heartbeat every 2 s and a look at the queue every s."""
    from eb_pytorch_cuda.testsuite.run.heartbeat import HeartbeatSettings
    test_dir = _tree(tmp_path / 'beat', sleepers=1, seconds=10, keep=())
    store = ResultStore(str(tmp_path / 'beat-results' / 'r.jsonl'), 'build-a')
    lines = []
    spread = controller.SpreadOptions(shared_paths=[str(tmp_path)], slurm_settings={'cpus_per_job': 1}, poll=1)
    request = RunRequest(_command(test_dir), dict(os.environ), str(tmp_path / 'beat-out'), sys.executable,
                         _timeouts(), heartbeat=HeartbeatSettings(2))
    result = execute(controller.SlurmExecutor(1, spread, lines.append), request, store)[1]
    assert result.suites['test_sleep_0'].status == 'passed'
    beats = [line for line in lines if line.startswith('still running after ') and 'test_sleep_0 (' in line]
    assert len(beats) >= 3, lines
    assert all(line.endswith('/2 suites done; no ETA (no previous results)') for line in beats), beats  # and c10d's
    controller.remove_queue(store)


def test_the_dry_runs_line_says_what_each_job_asks_for_and_when_no_gpu_is_asked():
    # gpus_per_job is 0 unless set: a spread CUDA build's jobs then see only what their partition gives
    plain = controller.SlurmExecutor(2, controller.SpreadOptions(environ={})).describe('/build')
    assert plain[0].startswith('spread over 2 Slurm jobs (sbatch with no options; no GPU asked for '
                               '(EB_PYTORCH_CUDA_SLURM_GPUS_PER_JOB;'), plain
    asked = controller.SlurmExecutor(3, controller.SpreadOptions(environ={
        'EB_PYTORCH_CUDA_SLURM_GPUS_PER_JOB': '4', 'EB_PYTORCH_CUDA_SLURM_PARTITION': 'gpu'})).describe('/build')
    assert asked[0].startswith('spread over 3 Slurm jobs (sbatch --partition gpu --gres=gpu:4; 4 GPU(s) a job;'), asked


def test_auto_slots_and_threads_are_sized_by_each_jobs_node_not_the_submitting_one(slurm, tmp_path):
    # the submitting process is confined to one CPU (a login node's share); Slurm starts the jobs outside that
    # affinity (task/none: they see the node's CPUs). parallel_test_suites='auto' is then each job's own size,
    # and no OMP_NUM_THREADS of the submitting node travels in the queue's spec
    source = tmp_path / 'src'
    _tree(source, sleepers=2, seconds=1, keep=('test_flaky',))
    env = dict(os.environ, EB_PYTORCH_CUDA_SHARED_PATHS=str(tmp_path))
    env.pop('OMP_NUM_THREADS', None)
    results = tmp_path / 'results'
    done = subprocess.run([sys.executable, '-m', 'eb_pytorch_cuda', 'test-suite', str(source), '--python',
                           sys.executable, '--results', str(results), '--format', 'json', '--timeout', '120',
                           '--jobs', '2'], capture_output=True, text=True, env=env, timeout=600,
                          preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
    assert done.stdout.strip().startswith('{'), done.stderr[-3000:]
    assert "parallel_test_suites='auto': each Slurm job sizes its own node" in done.stderr, done.stderr[-3000:]
    assert 'batch(es) at a time (parallel_test_suites=auto: 1 CPUs' not in done.stderr  # the submitter's size
    queue, = results.glob('results.jsonl.queue-*')
    spec = json.loads((queue / 'spec.json').read_text())
    assert spec['sized_by_jobs'] is True and 'OMP_NUM_THREADS' not in spec['env']
    outputs = ''.join(path.read_text() for path in (queue / 'output').glob('job-*.out'))
    cpus = len(os.sched_getaffinity(0))
    assert f'batch(es) at a time (parallel_test_suites=auto: {cpus} CPUs' in outputs, outputs[-3000:]
