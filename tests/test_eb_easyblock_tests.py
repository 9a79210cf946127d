"""Our EB_PyTorch's test step in real `eb` runs (4.9.4 and 5.4.1) on the PyTorch-shaped stand-in test tree.

The stand-in's run_test.py prints PyTorch's output forms and writes JUnit XML: test_cudnn needs the
cuDNN fix, test_known_failure has one failure listed in the easyconfig, test_flaky fails once and
passes on rerun, test_crash dies of SIGABRT (excluded by default).
"""

import json
import re

import pytest

from eb_pytorch_cuda.process import GRACE_SECONDS
from eb_runner import REPO, TEST_EASYCONFIGS
from helpers import cli
from procs import none_left

EASYBLOCK = REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py'
EC = 'PyTorch-2.1.2-standin-easyblock.eb'


def run(eb, easyconfig=EC, env=None, *options):
    done = eb.run(easyconfig, f'--include-easyblocks={EASYBLOCK}', *options, env=env)
    return done, done.stdout + done.stderr


def variant(tmp_path, **replacements):
    """A copy of the stand-in easyconfig with some parameters replaced (name kept for the robot)."""
    text = (TEST_EASYCONFIGS / EC).read_text()
    for key, value in replacements.items():
        text, count = re.subn(rf'^{key} = (\{{.*?^\}}|.*?)$', f'{key} = {value}', text, flags=re.M | re.S)
        assert count == 1, key
    path = tmp_path / 'ecs' / EC
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_known_and_flaky_failures_pass_and_reports_land_in_the_installation(eb):
    done, out = run(eb)
    assert done.returncode == 0, out
    # progress on the console
    assert re.search(r'== suite 5/5: test_known_failure failed in \S+ \(2 suite\(s\) failed so far; \S+ into the '
                     r'run\)', out)
    assert 'rerun of test_flaky::TestFlaky.test_sometimes: flaky' in out
    assert 'rerun of test_known_failure::TestKnown.test_always_fails: reproducible' in out
    assert 'known: 1, unknown: 0 (budget 0), flaky: 1' in out and '== verdict: PASS' in out
    assert 'reproducible on rerun: test_known_failure::TestKnown.test_always_fails' in out
    assert 'XML reports off' not in out  # a harness that runs its suites under pytest gets --save-xml
    # one run_test.py call for all suites (its own selection applied by its --dry-run)
    assert 'run_test.py --continue-through-error --verbose -x test_crash test_hang -i <suites>' in out
    assert 'in batches of up to 50' in out
    reports = eb.installdir('PyTorch', '2.1.2-standin-easyblock') / 'easybuild'
    data = json.loads((reports / 'pytorch-test-results.json').read_text())
    assert data['verdict'] == 'pass' and data['failed_tests'] == 2
    assert [f['test'] for f in data['known_failures']] == ['TestKnown.test_always_fails']
    assert data['flaky_failures'] == [{'suite': 'test_flaky', 'test': 'TestFlaky.test_sometimes'}]
    assert {s['name'] for s in data['suites']} == {'test_cudnn', 'test_flaky', 'test_known_failure',
                                                   'test_kills_eb', 'distributed/test_c10d_standin'}
    assert set(data['suite_seconds']) == {s['name'] for s in data['suites']}
    summary = (reports / 'pytorch-test-summary.md').read_text()
    assert summary.startswith('### PyTorch 2.1.2 test suite: PASS')
    # the installation's JSON alone, judged again by `report`: the terms it carries, the build's own lines
    report = cli('report', reports / 'pytorch-test-results.json', check_rc=0)
    first, *judged = report.stdout.splitlines()
    assert first == 'terms: as judged by the build (budget 0, 1 known failure)'
    assert '\n'.join(f'== {line}' for line in judged) + '\n' in out, (report.stdout, out)


def test_an_exclusion_without_a_file_is_said_and_the_build_passes(eb, tmp_path):
    """Names that can be test files but that this tree has not (the stand-in harness's TESTS, as PyTorch's):
    one line at the step, left out of -x (PyTorch's own -x would stop on them); whitespace around a name is
    dropped as upstream's join drops it."""
    path = variant(tmp_path, excluded_tests="{'': ['test_hang ', ' test_crash', 'test_\u00f1', "
                                            "'distributed/test_nvshmem_triton']}")
    done, out = run(eb, path)
    assert done.returncode == 0, out
    assert ("excluded_tests: 'test_\u00f1', 'distributed/test_nvshmem_triton': no such test file in this tree "
            "(its run_test.py's TESTS), so nothing to exclude; left out of -x") in out
    assert 'run_test.py --continue-through-error --verbose -x test_hang test_crash -i <suites>' in out


def test_an_unknown_failure_over_the_budget_fails_the_build_naming_it(eb):
    done, out = run(eb, env={'STANDIN_UNKNOWN_FAILURE': '1'})
    assert done.returncode != 0
    assert 'unknown failure: test_known_failure::TestKnown.test_new_regression' in out
    assert 'PyTorch test suite failed: 1 unknown failure(s), budget 0' in out


def test_an_unlisted_crashed_suite_fails_even_with_a_budget(eb, tmp_path):
    path = variant(tmp_path, excluded_tests="{'': ['test_hang']}", max_failed_tests='100')
    done, out = run(eb, path)
    assert done.returncode != 0
    assert 'test_crash (killed by SIGIOT)' in out
    assert 'PyTorch test suite failed: test_crash: killed by SIGIOT, and not a known failure' in out


@pytest.mark.parametrize('allowed', ['1', 'True'])
def test_allow_missing_failures_lets_an_unlisted_crashed_suite_pass_with_a_warning(eb, tmp_path, allowed):
    # upstream's allow_missing_failures (easybuild-easyblocks #4052): up to that many failed suites that could
    # not be counted pass, each with a warning; on 4.9.4, whose EB_PyTorch lacks it, our easyblock adds it
    path = variant(tmp_path, excluded_tests="{'': ['test_hang']}")
    path.write_text(path.read_text() + f'\nallow_missing_failures = {allowed}\n')
    done, out = run(eb, path)
    assert done.returncode == 0, out
    assert ('WARNING, not judged but allowed: test_crash: killed by SIGIOT, and not a known failure '
            f'(allow_missing_failures = {allowed})') in out
    data = json.loads((eb.installdir('PyTorch', '2.1.2-standin-easyblock') / 'easybuild' /
                       'pytorch-test-results.json').read_text())
    assert data['verdict'] == 'pass' and len(data['tolerated']) == 1


def test_allow_missing_failures_below_the_count_still_fails(eb, tmp_path):
    path = variant(tmp_path, excluded_tests="{'': ['test_hang']}")
    path.write_text(path.read_text() + '\nallow_missing_failures = 0\nallow_extra_failures = False\n')
    done, out = run(eb, path)
    assert done.returncode != 0
    assert 'PyTorch test suite failed: test_crash: killed by SIGIOT, and not a known failure' in out


def test_pretestopts_and_testopts_apply_as_pythonpackage_applies_them(eb, tmp_path):
    # PythonPackage.test_step runs `pretestopts runtest testopts` in a shell; ours runs it without one:
    # pretestopts' exports become the test command's environment, testopts its last arguments
    run_log = tmp_path / 'suites-run.log'
    path = variant(tmp_path)
    path.write_text(path.read_text() + f'\npretestopts = "export STANDIN_RUN_LOG={run_log} && "\n'
                    "testopts = '--continue-through-error'\n")
    done, out = run(eb, path)
    assert done.returncode == 0, out
    assert set(run_log.read_text().split()) == {'test_cudnn', 'test_flaky', 'test_known_failure', 'test_kills_eb',
                                                'distributed/test_c10d_standin'}  # the export reached the suites
    assert ('run_test.py --continue-through-error --verbose -x test_crash test_hang --continue-through-error '
            '-i <suites>') in out  # testopts after the runtest line's words


def test_pretestopts_that_need_a_shell_are_refused_naming_the_easyconfig(eb, tmp_path):
    path = variant(tmp_path)
    path.write_text(path.read_text() + '\npretestopts = "ulimit -s unlimited && "\n')
    done, out = run(eb, path)
    assert done.returncode != 0
    assert (f"{path}: pretestopts: 'ulimit' needs a shell; only `export VAR=value &&` and `VAR=value` are applied "
            "to the test command (no shell): 'ulimit -s unlimited && '") in out


def test_listing_the_crashed_suite_as_known_lets_it_pass(eb, tmp_path):
    known = ("{'': [('test_known_failure::TestKnown.test_always_fails', 'on purpose'), "
             "('test_crash', 'aborts on this node type')]}")
    done, out = run(eb, variant(tmp_path, excluded_tests="{'': ['test_hang']}", known_test_failures=known))
    assert done.returncode == 0, out
    assert 'test_crash (SIGIOT, known)' in out


def test_a_hanging_suite_is_killed_at_its_timeout_and_reported(eb, tmp_path):
    path = variant(tmp_path, excluded_tests="{'': ['test_crash']}", test_suite_timeout='5',
                   max_failed_tests='100')
    done, out = run(eb, path)
    assert done.returncode != 0
    # its batch is killed once the hang has run its own timeout (not the sum of the batch's); the hang is
    # recorded timed out there, and only the batch's other unfinished suites run again alone
    assert 'test_hang: not finished when its batch was killed' not in out
    assert re.search(r'suite \d/6: test_hang timed out \(', out)
    assert 'PyTorch test suite failed: test_hang: killed by timeout after 5s, and not a known failure' in out


def test_a_killed_eb_resumes_without_running_any_suite_twice(eb, tmp_path):
    # the stand-in suite kills eb once the suites before it are in the results store, and is still running
    # when eb dies (test_kills_eb.py): the kill lands there on a loaded machine too, not by its being quick
    run_log, marker = tmp_path / 'suites-run.log', tmp_path / 'killed-once'
    env = {'STANDIN_RUN_LOG': str(run_log), 'STANDIN_KILL_EB_ONCE': str(marker),
           'STANDIN_KILL_EB_WHEN_STORED': str(tmp_path / 'eb' / 'build' / '.eb-pytorch-cuda-test-results'),
           'STANDIN_FLAKY_MARKER': str(tmp_path / 'flaky-failed-once')}
    first, _ = run(eb, env=env)
    assert first.returncode != 0 and marker.exists()  # eb died inside the test step
    suite_pids = [int(pid) for pid in (tmp_path / 'killed-once.pids').read_text().split()]
    # the suite and its grandchild died with eb (eb_pytorch_cuda.process); bounded generously for a loaded
    # machine (the supervisor's grace, then its SIGKILL)
    assert none_left(suite_pids, GRACE_SECONDS + 50)
    ran_first = run_log.read_text().split()
    assert 'test_kills_eb' in ran_first and 'test_known_failure' not in ran_first
    second, out = run(eb, EC, env, '--ignore-locks')  # the killed eb left its lock, as EasyBuild says
    assert second.returncode == 0, out
    ran = run_log.read_text().split()
    # only the suite that was running when eb died runs again; every finished one is taken as measured
    assert sorted(ran) == sorted([*set(ran), 'test_kills_eb']), ran
    assert 'resuming: 3 suite(s) already measured for this build, 2 to run' in out
    assert 'rerun of test_flaky::TestFlaky.test_sometimes: flaky' in out


def test_a_policy_change_rejudges_without_running_a_suite_or_rebuilding(eb, tmp_path):
    run_log, build_log = tmp_path / 'suites-run.log', tmp_path / 'builds.log'
    env = {'STANDIN_RUN_LOG': str(run_log), 'STANDIN_UNKNOWN_FAILURE': '1', 'STANDIN_BUILD_LOG': str(build_log),
           'STANDIN_FLAKY_MARKER': str(tmp_path / 'flaky-failed-once')}
    failed, out = run(eb, env=env)
    assert failed.returncode != 0 and 'results and the tested build are kept' in out
    before, builds = run_log.read_text(), build_log.read_text()
    known = ("{'': [('test_known_failure::TestKnown.test_always_fails', 'on purpose'), "
             "('test_known_failure::TestKnown.test_new_regression', 'accepted after review')]}")
    passed, out = run(eb, variant(tmp_path, known_test_failures=known), env=env)
    assert passed.returncode == 0, out
    assert run_log.read_text() == before  # judged again, nothing ran
    assert build_log.read_text() == builds  # and nothing was built again
    assert 'nothing is rebuilt' in out and 'installing the reused tested build' in out
    assert 'rerun of test_flaky::TestFlaky.test_sometimes' not in out  # the kept result has the reruns
    data = json.loads((eb.installdir('PyTorch', '2.1.2-standin-easyblock') / 'easybuild' /
                       'pytorch-test-results.json').read_text())
    assert data['verdict'] == 'pass' and len(data['known_failures']) == 2
    assert {'suite': 'test_flaky', 'test': 'TestFlaky.test_sometimes'} in data['flaky_failures']


@pytest.mark.parametrize('option', ['--rebuild', '--force'])
def test_rebuild_and_force_discard_the_kept_results_and_say_so(eb, tmp_path, option):
    run_log, build_log = tmp_path / 'suites-run.log', tmp_path / 'builds.log'
    env = {'STANDIN_RUN_LOG': str(run_log), 'STANDIN_UNKNOWN_FAILURE': '1', 'STANDIN_BUILD_LOG': str(build_log),
           'STANDIN_FLAKY_MARKER': str(tmp_path / 'flaky-failed-once')}
    failed, out = run(eb, env=env)
    assert failed.returncode != 0 and 'results and the tested build are kept' in out
    store = next((tmp_path / 'eb' / 'build' / '.eb-pytorch-cuda-test-results').glob('*.jsonl'))
    suites_before, builds_before = run_log.read_text().split(), build_log.read_text().splitlines()
    again, out = run(eb, EC, env, option)
    assert again.returncode != 0  # the same unknown failure, found by running the suites again
    assert (f'{option}: discarded the test results and tested build kept by an earlier run of this build '
            f'({store}): every suite runs again') in out
    assert 'nothing is rebuilt' not in out and 'resuming:' not in out
    assert len(build_log.read_text().splitlines()) > len(builds_before)  # built again
    assert len(run_log.read_text().split()) >= 2 * len(suites_before)  # every suite ran again


def test_rebuild_of_a_spread_build_runs_every_suite_again_in_new_jobs(eb, slurm, tmp_path):
    # a failed spread build keeps its store and its Slurm queue (the jobs' stored outcomes); --rebuild drops both:
    # with the queue left, its outcomes came back as the new run's and no suite ran again
    path = variant(tmp_path, parallel_test_suites='1')
    path.write_text(path.read_text() + '\ntest_suite_jobs = 2\n')
    run_log = tmp_path / 'suites-run.log'
    env = {'STANDIN_RUN_LOG': str(run_log), 'STANDIN_UNKNOWN_FAILURE': '1',
           'EB_PYTORCH_CUDA_SHARED_PATHS': str(tmp_path), 'EB_PYTORCH_CUDA_SLURM_CPUS_PER_JOB': '1',
           'STANDIN_FLAKY_MARKER': str(tmp_path / 'flaky-failed-once')}
    failed, out = run(eb, path, env)
    assert failed.returncode != 0 and 'results and the tested build are kept' in out, out
    results = tmp_path / 'eb' / 'build' / '.eb-pytorch-cuda-test-results'
    assert [p for p in results.iterdir() if '.queue-' in p.name]  # kept with the store
    suites_before = run_log.read_text().split()
    again, out = run(eb, path, env, '--rebuild')
    assert again.returncode != 0, out  # the same unknown failure, found by running the suites again
    assert '--rebuild: discarded the test results and tested build kept by an earlier run' in out, out
    assert 'resuming:' not in out and re.search(r'running 5 suites on 2 Slurm job', out), out
    assert len(run_log.read_text().split()) >= 2 * len(suites_before)  # every suite ran again


def test_parallel_suites_give_the_same_results(eb, tmp_path):
    done, out = run(eb, variant(tmp_path, parallel_test_suites='3'))
    assert done.returncode == 0, out
    assert '3 batch(es) at a time;' in out
    data = json.loads((eb.installdir('PyTorch', '2.1.2-standin-easyblock') / 'easybuild' /
                       'pytorch-test-results.json').read_text())
    assert data['verdict'] == 'pass' and data['failed_tests'] == 2 and len(data['suites']) == 5


def test_the_test_step_spread_over_two_slurm_jobs_gives_the_serial_verdict(eb, slurm, tmp_path):
    # real `eb`, real Slurm (tests/slurm_cluster.py): the easyblock's own path to testsuite/spread
    path = variant(tmp_path, parallel_test_suites='1')
    path.write_text(path.read_text() + '\ntest_suite_jobs = 2\n')
    done, out = run(eb, path, {'EB_PYTORCH_CUDA_SHARED_PATHS': str(tmp_path),
                               'EB_PYTORCH_CUDA_SLURM_CPUS_PER_JOB': '1'})
    assert done.returncode == 0, out
    assert re.search(r'running 5 suites on 2 Slurm job\(s\) \(--cpus-per-task 1;', out), out
    assert re.search(r'suites 5/5 done on 2 job\(s\); 2 failed', out), out
    # what the serial run of the first test says, from results gathered by the jobs
    assert 'rerun of test_flaky::TestFlaky.test_sometimes: flaky' in out
    assert 'known: 1, unknown: 0 (budget 0), flaky: 1' in out and '== verdict: PASS' in out
    data = json.loads((eb.installdir('PyTorch', '2.1.2-standin-easyblock') / 'easybuild' /
                       'pytorch-test-results.json').read_text())
    assert data['verdict'] == 'pass' and data['failed_tests'] == 2 and len(data['suites']) == 5
    results = tmp_path / 'eb' / 'build' / '.eb-pytorch-cuda-test-results'
    assert results.is_dir() and not [p for p in results.iterdir() if '.queue-' in p.name]  # removed once passed


def test_an_easyconfig_without_max_failed_tests_gets_upstreams_default(eb, tmp_path):
    # upstream EB_PyTorch's default: 10 since easybuild-easyblocks #3869 (5.x), 0 in 4.9.4; the dry run shows
    # the budget the test step would judge by
    path = variant(tmp_path)
    path.write_text(re.sub(r'^max_failed_tests = .*$\n', '', path.read_text(), flags=re.M))
    done, out = run(eb, path, None, '-x')
    assert done.returncode == 0, out
    budget = {'4.9.4': 0, '5.4.1': 10}[eb.version]
    assert f'budget for unknown failures: {budget}; reruns:' in out, out


@pytest.mark.parametrize('line,problem', [
    ('max_failed_tests = -4', 'max_failed_tests must be an integer >= 0, got -4'),  # was: FAIL, "budget -4"
    ("max_failed_tests = 'three'", "max_failed_tests must be an integer >= 0, got 'three'"),  # was: a traceback
    ('test_suite_timeout = -5', 'test_suite_timeout must be an integer >= 1, got -5'),  # was: every suite killed
    ("excluded_tests = {'': 'test_slow'}", "excluded_tests: scope '' must map to a list of test files"),  # -x t e s..
    ("cuda_compute_capabilities = '8.0'", "cuda_compute_capabilities must be a list of strings such as ['8.0', "
                                          "'9.0'], got '8.0'"),  # was: scopes '8', '.', '0'
    ('known_test_failures = 5', 'known_test_failures must be a dict {scope: [...]}, got 5'),  # was: a traceback
    ('allow_missing_failures = -1', 'allow_missing_failures must be True, False or an integer >= 0, got -1'),
    ("allow_extra_failures = 'yes'", "allow_extra_failures must be True, False or an integer >= 0, got 'yes'"),
    ('rerun_failed_tests = 10**6', 'rerun_failed_tests must be an integer >= 0 and <= 10, got 1000000'),  # ran on
    ("excluded_tests = {'': ['--help']}", "excluded_tests: '--help' in scope '' is not a test name"),
    # each excluded nothing, without a word: names of run_test.py's TESTS only (policy/judging.name_problem)
    ("excluded_tests = {'': ['test_x.py']}", "excluded_tests: 'test_x.py' in scope '' is not a test name (a file "
                                             "name: write it without .py ('test_x')"),
    ("excluded_tests = {'x86_64': ['../x']}", "excluded_tests: '../x' in scope 'x86_64' is not a test name (a path "
                                              "outside test/"),
    ("excluded_tests = {'': ['/etc/passwd']}", "excluded_tests: '/etc/passwd' in scope '' is not a test name (a path"),
    ("excluded_tests = {'': ['test_*']}", "excluded_tests: 'test_*' in scope '' is not a test name (a glob"),
    ("excluded_tests = {'': ['test_x;id']}", "excluded_tests: 'test_x;id' in scope '' is not a test name (letters, "
                                             "digits, _ and - between / only"),
    ("known_test_failures = {'': [('../test_x::T.t', 'why')]}", "known_test_failures: entry ('../test_x::T.t', "
                                                                "'why') in scope '': '../test_x' is not a test file"),
    # a scope that could never apply excluded or excused nothing, without a word (results/scopes.Scope.parse)
    ("excluded_tests = {'haswell': ['test_x']}", "excluded_tests: scope 'haswell' is not '', a CPU family"),
    ("known_test_failures = {'sm_90': [('test_x', 'why')]}", "known_test_failures: scope 'sm_90' is not '', a CPU "
                                                             "family"),
    # was: split into characters (14 warnings, then "refusing to add NEEDED ."), a TypeError traceback, the default
    ("cudnn_needed = {8: 'libcudnn_cnn_train.so.8'}", "cudnn_needed[8] must be a list of sonames such as"),
    ('cudnn_needed = 5', 'cudnn_needed must be a list of sonames such as'),
    ("cudnn_needed = 'libcudnn_cnn_train.so.8'", "cudnn_needed must be a list of sonames such as "),
    ("cudnn_needed = {'8': ['libcudnn_cnn_train.so.8']}", "cudnn_needed: key '8' must be a cuDNN major version"),
    ("cudnn_needed = {-1: []}", "cudnn_needed: key -1 must be a cuDNN major version"),  # was: the defaults added
    ("cudnn_needed = ['lib/libcudnn_cnn_train.so.8']", "cudnn_needed 'lib/libcudnn_cnn_train.so.8' is not a soname"),
])
def test_a_bad_test_parameter_stops_eb_before_any_step_naming_the_parameter(eb, tmp_path, line, problem):
    path = variant(tmp_path)
    name = line.split(' = ')[0]
    text = re.sub(rf'^{name} = (\{{.*?^\}}|.*?)$\n', '', path.read_text(), flags=re.M | re.S)
    path.write_text(text + line + '\n')
    build_log = tmp_path / 'builds.log'
    done, out = run(eb, path, {'STANDIN_BUILD_LOG': str(build_log)})
    assert done.returncode != 0
    errors = [row for row in out.splitlines() if 'ERROR' in row and problem in row]
    assert errors and str(path) in errors[0], out
    assert 'Traceback' not in out
    assert not build_log.exists() and 'running ' not in out  # nothing was built, no suite ran


def _store_path(eb):
    """The easyblock's results store of the stand-in (pytorch.py _results_store_path: outside the build dir)."""
    return eb.prefix / 'build' / '.eb-pytorch-cuda-test-results' / 'PyTorch-2.1.2-standin-easyblock-system-system.jsonl'


@pytest.mark.parametrize('case,problem', [
    ('store-directory', 'is a directory, not a regular file'),
    ('final-unknown-key', "is not a kept result (unknown key 'surprise')"),
    ('final-suites-5', 'is not a kept result (suites: must be a list, got 5)'),
])
def test_a_store_or_kept_result_we_never_wrote_is_one_easybuild_error_naming_it(eb, tmp_path, case, problem):
    store = _store_path(eb)
    store.parent.mkdir(parents=True)
    final = store.parent / (store.name + '.final.json')
    if case == 'store-directory':
        store.mkdir()
        named = store
    else:
        data = {'fingerprint': 'f' * 64, 'suites': []}
        data.update({'surprise': 1} if case == 'final-unknown-key' else {'suites': 5})
        final.write_text(json.dumps(data))
        named = final
    done, out = run(eb)
    assert done.returncode != 0
    assert 'Traceback' not in out, out
    errors = [line for line in out.splitlines() if 'ERROR' in line]
    assert errors and all(f'{named}: {problem}' in line for line in errors), out  # was: a traceback
