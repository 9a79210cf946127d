"""Run the test suites one process each: per-suite timeouts, results saved as each suite ends, resume.

A ten-hour test step must survive a hanging multiprocess test and a killed `eb`.  So each suite
(`run_test.py -i <suite>`) runs in its own process group with a timeout that kills the whole group;
its outcome (parsed from its output and its XML reports) is appended to a results file outside the
build directory the moment it ends; and a rerun of the same build (same fingerprint: sources,
patches, build settings, compiler options, not the failure policy) skips every suite already there.
Opt-in parallelism runs N suites at a time, pinning each to a GPU with CUDA_VISIBLE_DEVICES.
"""

import json
import os
import re
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.logparse import parse_log_text
from eb_pytorch_cuda.testsuite.model import SUITE_INCOMPLETE, SUITE_TIMED_OUT, RunResult, Suite
from eb_pytorch_cuda.testsuite.results import merge
from eb_pytorch_cuda.testsuite.runner import kill_group
from eb_pytorch_cuda.testsuite.xmlparse import parse_report_files

DEFAULT_TIMEOUT = 3 * 3600  # PyTorch's slowest suites take well under an hour on a build node
OUTPUT_KEPT = 20000  # characters of a suite's output kept in the results file
_SELECTED = re.compile(r'^Selected tests:\s*\n((?:[ \t]+\S.*\n?)*)', re.M)


def discover_suites(command, env):
    """The suites run_test.py would run, from `run_test.py ... --dry-run` (no shell)."""
    done = subprocess.run(command.argv + ['--dry-run'], cwd=command.cwd, env=env, capture_output=True, text=True,
                          errors='replace', timeout=3600)
    match = _SELECTED.search(done.stdout + done.stderr)
    if not match:
        raise PluginError('runtest', f"'{' '.join(command.argv)} --dry-run' listed no tests (exit {done.returncode})")
    return [line.strip() for line in match.group(1).splitlines() if line.strip()]


class ResultStore:
    """Append-only JSON-lines file of finished suites, for one build fingerprint."""

    def __init__(self, path, fingerprint):
        self.path, self.fingerprint = path, fingerprint
        self._lock = threading.Lock()
        os.makedirs(os.path.dirname(path), exist_ok=True)

    def load(self):
        """{suite name: record} already measured for this fingerprint (a truncated last line is ignored)."""
        records = {}
        if os.path.exists(self.path):
            with open(self.path) as handle:
                for line in handle:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue  # the line being written when eb was killed
                    if record.get('fingerprint') == self.fingerprint:
                        records[record['suite']['name']] = record
        return records

    def append(self, record):
        record = dict(record, fingerprint=self.fingerprint)
        with self._lock, open(self.path, 'a') as handle:
            handle.write(json.dumps(record) + '\n')
            handle.flush()
            os.fsync(handle.fileno())

    @property
    def final_path(self):
        return self.path + '.final.json'

    @property
    def cache_dir(self):
        """Where the tested installation of a run whose only problem was the verdict is kept."""
        return self.path + '.install'

    def save_final(self, result):
        """The complete, rerun-classified result of this build, for a later re-judging."""
        with open(self.final_path, 'w') as handle:
            json.dump({'fingerprint': self.fingerprint, **result.to_dict()}, handle)

    def load_final(self):
        try:
            with open(self.final_path) as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return None
        return RunResult.from_dict(data) if data.get('fingerprint') == self.fingerprint else None

    def remove(self):
        for path in (self.path, self.final_path):
            if os.path.exists(path):
                os.unlink(path)
        if os.path.isdir(self.cache_dir):
            shutil.rmtree(self.cache_dir)


def _suite_reports(test_dir, suite):
    """The XML reports this suite wrote (test-reports/<runner>/<dotted.suite>/...), as a RunResult or None."""
    dotted = suite.replace('/', '.')
    reports = os.path.join(test_dir, 'test-reports')
    if not os.path.isdir(reports):
        return None
    directories = [os.path.join(reports, runner, dotted) for runner in os.listdir(reports)]
    files = [os.path.join(d, f) for d in directories if os.path.isdir(d) for f in os.listdir(d) if f.endswith('.xml')]
    if not files:
        return None
    return parse_report_files(reports, sorted(files)).suites.get(suite)


def run_suite(command, suite, timeout, output_dir, env, gpu=None):
    """Run one suite in its own process group; return its record (the parsed Suite plus facts)."""
    argv = command.argv + ['-i', suite]
    env = dict(env)
    if gpu is not None:
        env['CUDA_VISIBLE_DEVICES'] = str(gpu)
    output_path = os.path.join(output_dir, suite.replace('/', '.') + '.log')
    start = time.time()
    with open(output_path, 'w') as output:
        process = subprocess.Popen(argv, cwd=command.cwd, env=env, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            code, status = process.wait(timeout=timeout), None
        except subprocess.TimeoutExpired:
            kill_group(process)
            code, status = process.returncode, SUITE_TIMED_OUT
    with open(output_path, errors='replace') as handle:
        text = handle.read()
    suite_result = _judgeable_suite(suite, text, command.cwd, status, timeout)
    suite_result.seconds = round(time.time() - start, 1)
    return {'suite': asdict(suite_result), 'exit_code': code, 'seconds': round(time.time() - start, 1),
            'gpu': gpu, 'output_tail': text[-OUTPUT_KEPT:], 'output_file': output_path}


def _judgeable_suite(suite, text, test_dir, status, timeout):
    try:
        parsed = parse_log_text(text).suites.get(suite)
    except PluginError:
        parsed = None
    from_xml = _suite_reports(test_dir, suite)
    if from_xml and parsed:
        combined = RunResult({suite: from_xml})
        merge(combined, RunResult({suite: parsed}))
        result = combined.suites[suite]
    else:
        result = from_xml or parsed or Suite(suite, status=SUITE_INCOMPLETE, sources=['log'])
    if status == SUITE_TIMED_OUT:
        result.status, result.signal = SUITE_TIMED_OUT, f'timeout after {timeout}s'
    return result


def gpu_count(env):
    """GPUs to spread parallel suites over: CUDA_VISIBLE_DEVICES if set, else nvidia-smi -L."""
    visible = env.get('CUDA_VISIBLE_DEVICES')
    if visible:
        return [gpu for gpu in visible.split(',') if gpu]
    try:
        listing = subprocess.run(['nvidia-smi', '-L'], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(listing.splitlines()) if line.startswith('GPU ')]


def run_all(command, suites, store, output_dir, env, timeout_for, parallel=1, progress=None):
    """Run every suite not already in the store; return (RunResult of all, [suites run now])."""
    done = store.load()
    todo = [suite for suite in suites if suite not in done]
    if progress and done:
        progress(f'resuming: {len(done)} suite(s) already measured for this build, {len(todo)} to run')
    gpus = gpu_count(env) if parallel > 1 else []
    lock, finished = threading.Lock(), [len(done)]
    failing = [sum(1 for record in done.values() if record['suite']['status'] != 'passed')]

    def one(index_suite):
        index, suite = index_suite
        gpu = gpus[index % len(gpus)] if gpus else None
        record = run_suite(command, suite, timeout_for(suite), output_dir, env, gpu)
        store.append(record)
        with lock:
            finished[0] += 1
            state = record['suite']['status']
            failing[0] += state != 'passed'
            if progress:
                progress(f"suite {finished[0]}/{len(suites)}: {suite} {state} ({record['seconds']}s; "
                         f"{failing[0]} suite(s) failed so far)")
        return record

    os.makedirs(output_dir, exist_ok=True)
    if parallel > 1:
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            list(pool.map(one, enumerate(todo)))
    else:
        for item in enumerate(todo):
            one(item)
    records = store.load()
    result = RunResult.from_dict({'suites': [records[suite]['suite'] for suite in suites if suite in records]})
    return result, todo
