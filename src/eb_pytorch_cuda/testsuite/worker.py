"""What each Slurm job of a spread test step runs: `python -m eb_pytorch_cuda.testsuite.worker QUEUE_DIR`.

It takes suites from the shared queue (queue.SuiteQueue) until none is left, runs each with the same
per-suite runner as a serial test step (its own process group, the suite's timeout, pinned to one of
the job's GPUs), and stores each outcome as it ends.  `slots` suites run at a time (the job's
parallel_test_suites), spread over the GPUs Slurm gave the job (its CUDA_VISIBLE_DEVICES); a suite the
harness must run alone (spec['serial']: its must-serial list, custom handlers, distributed suites) runs
alone in its job too, with all of the job's GPUs, as run_test.py runs them after its pool (alone in its
job: other jobs sharing the node still run theirs; ask Slurm for whole nodes, e.g. --exclusive in
EB_PYTORCH_CUDA_SLURM_EXTRA_OPTIONS, where that matters).  A heartbeat
thread keeps the worker's claims alive; if the job dies, its claims go back to the queue.

The runner is reached through run_one() only, so that another runner (e.g. one that batches suites in
one run_test.py call) can be plugged in at one place.
"""

import os
import sys
import threading
from contextlib import contextmanager
from typing import Mapping, Optional

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite import suiterun
from eb_pytorch_cuda.testsuite.command import TestCommand
from eb_pytorch_cuda.testsuite.queue import HEARTBEAT_EVERY, SuiteQueue, worker_id

# variables that describe the job, which must come from the job's own environment, not the submitter's
JOB_VARIABLES = ('CUDA_VISIBLE_DEVICES', 'ROCR_VISIBLE_DEVICES', 'GPU_DEVICE_ORDINAL', 'TMPDIR')


def run_one(spec: dict, suite: str, env: dict, gpu: Optional[str]) -> dict:
    """Adapter to the per-suite runner: run `suite` as spec describes; return its record (suiterun's form)."""
    command = TestCommand(spec['cwd'], {}, list(spec['argv']))
    timeout = spec['timeouts'].get(suite, spec['timeouts'][''])
    return suiterun.run_suite(command, suite, timeout, spec['output_dir'], env, gpu)


class SerialGate:
    """Lets the job's slots run suites side by side, except a must-serial suite: it waits until the other
    slots are idle, and no slot starts a suite while it waits or runs."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running = 0
        self._alone = False

    def wait_open(self) -> None:
        """Wait while a must-serial suite waits or runs: a slot claims its next suite only then, so that no
        claimed suite sits idle in this job (other jobs could run it) while a serial one has the job."""
        with self._changed:
            self._changed.wait_for(lambda: not self._alone)

    @contextmanager
    def hold(self, alone: bool):
        with self._changed:
            self._changed.wait_for(lambda: not self._alone)
            if alone:
                self._alone = True
                self._changed.wait_for(lambda: self._running == 0)
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                if alone:
                    self._alone = False
                self._changed.notify_all()


def job_environment(spec: dict, own: Mapping[str, str]) -> dict:
    """The submitter's test environment, with the job's own Slurm and GPU variables."""
    env = {name: value for name, value in spec['env'].items()
           if not name.startswith('SLURM_') and name not in JOB_VARIABLES}
    env.update({name: value for name, value in own.items() if name.startswith('SLURM_') or name in JOB_VARIABLES})
    return env


def work(queue_dir: str, worker: Optional[str] = None, log=print) -> int:
    """Claim and run suites until none is left; return how many this worker ran."""
    queue = SuiteQueue(queue_dir)
    spec = queue.spec
    queue.stale_after = spec.get('stale_after', queue.stale_after)
    queue.max_attempts = spec.get('max_attempts', queue.max_attempts)
    worker = worker or worker_id()
    env = job_environment(spec, os.environ)
    slots = max(1, int(spec.get('slots', 1)))
    gpus = suiterun.gpu_count(env) if slots > 1 else []
    os.makedirs(spec['output_dir'], exist_ok=True)
    store = queue.store(worker)
    stop = threading.Event()
    queue.heartbeat(worker)

    def beat():
        while not stop.wait(spec.get('heartbeat_every', HEARTBEAT_EVERY)):
            queue.heartbeat(worker)

    lock, ran = threading.Lock(), [0]
    serial, gate = set(spec.get('serial', ())), SerialGate()

    def slot(index):
        gpu = gpus[index % len(gpus)] if gpus else None
        while True:
            gate.wait_open()
            with lock:  # one claim at a time per worker: claims of one worker never race each other
                suite = queue.claim_next(worker)
            if suite is None:
                return
            alone = suite in serial and slots > 1
            with gate.hold(alone):
                on = None if alone else gpu  # alone: every GPU of the job, as the harness gives a serial suite
                log(f'{worker}: running {suite}' + (' alone' if alone else '') +
                    (f' on GPU {on}' if on is not None else ''), flush=True)
                record = run_one(spec, suite, env, on)
                with lock:
                    queue.record(store, record)
                    ran[0] += 1
                log(f"{worker}: {suite} {record['suite']['status']} ({record['seconds']}s)", flush=True)

    heart = threading.Thread(target=beat, daemon=True)
    heart.start()
    try:
        threads = [threading.Thread(target=slot, args=(index,)) for index in range(slots)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop.set()
    log(f'{worker}: no suite left to claim; ran {ran[0]}', flush=True)
    return ran[0]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print('usage: python -m eb_pytorch_cuda.testsuite.worker QUEUE_DIR', file=sys.stderr)
        return 2
    try:
        work(argv[0])
    except PluginError as err:
        print(f'eb_pytorch_cuda.testsuite.worker: {err}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
