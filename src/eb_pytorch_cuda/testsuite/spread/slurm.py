"""Slurm for a spread test step: job options, `sbatch` submission, which jobs are still there, and the
refusal of a node-local path (a queue that only one node sees would leave every other job idle).

Commands are argument lists (never a shell): the batch script is a Python file whose `#!` line is the
interpreter, with the queue directory passed as its argument, so no name or path is ever interpolated
into shell code.  Job options come from explicit settings (the easyconfig, `--jobs` on the command
line), else `EB_PYTORCH_CUDA_SLURM_*`, else EasyBuild's own job options (`--job-cores`,
`--job-max-walltime` as EASYBUILD_JOB_*); anything else Slurm reads itself (SBATCH_* variables).
"""

import os
import shlex
import subprocess
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Set

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.spread.jobpool import JobVariables, PoolFactory
from eb_pytorch_cuda.testsuite.spread.workqueue import SuiteQueue

ENV_PREFIX = 'EB_PYTORCH_CUDA_SLURM_'
JOB_VARIABLES = JobVariables('SLURM_JOB_ID', 'SLURM_')  # what sbatch sets in each job (its id, its own variables)
SHARED_PATHS_VARIABLE = 'EB_PYTORCH_CUDA_SHARED_PATHS'
NODE_LOCAL_DIRS = ('/tmp', '/dev/shm', '/var/tmp', '/run')
# file systems that only the node itself sees (fs types as /proc/mounts names them)
LOCAL_FS_TYPES = {'ext2', 'ext3', 'ext4', 'xfs', 'btrfs', 'tmpfs', 'ramfs', 'overlay', 'zfs', 'f2fs', 'jfs',
                  'reiserfs', 'vfat', 'exfat', 'squashfs', 'devtmpfs'}
# Slurm job states in which a job still runs or will run (squeue -o %T)
LIVE_STATES = {'PENDING', 'CONFIGURING', 'RUNNING', 'COMPLETING', 'REQUEUED', 'RESIZING', 'SUSPENDED',
               'STAGE_OUT', 'SIGNALING', 'REQUEUE_HOLD', 'REQUEUE_FED'}


@dataclass
class JobOptions:
    """What each job asks Slurm for."""

    partition: Optional[str] = None
    gpus_per_job: int = 0
    cpus_per_job: Optional[int] = None
    time_limit: Optional[str] = None  # Slurm's forms: minutes, 'HH:MM:SS', 'D-HH:MM:SS'
    extra: List[str] = field(default_factory=list)

    def sbatch_options(self) -> List[str]:
        options = []
        if self.partition:
            options += ['--partition', self.partition]
        if self.gpus_per_job:
            options += [f'--gres=gpu:{int(self.gpus_per_job)}']
        if self.cpus_per_job:
            options += ['--cpus-per-task', str(int(self.cpus_per_job))]
        if self.time_limit:
            options += ['--time', str(self.time_limit)]
        return options + list(self.extra)


def job_options(settings: Optional[dict] = None, environ: Optional[Mapping[str, str]] = None) -> JobOptions:
    """JobOptions from settings {partition, gpus_per_job, cpus_per_job, time_limit, extra (list or string)},
    else EB_PYTORCH_CUDA_SLURM_{PARTITION,GPUS_PER_JOB,CPUS_PER_JOB,TIME_LIMIT,EXTRA_OPTIONS}, else
    EasyBuild's EASYBUILD_JOB_CORES and EASYBUILD_JOB_MAX_WALLTIME (hours)."""
    settings = {k: v for k, v in (settings or {}).items() if v not in (None, '')}
    environ = os.environ if environ is None else environ

    def pick(key, easybuild=None):
        if key in settings:
            return settings[key]
        value = environ.get(ENV_PREFIX + key.upper()) or (environ.get(easybuild) if easybuild else None)
        return value or None

    extra = pick('extra_options') or settings.get('extra') or []
    if isinstance(extra, str):
        extra = shlex.split(extra)
    walltime = pick('time_limit')
    if walltime is None and environ.get('EASYBUILD_JOB_MAX_WALLTIME'):
        walltime = str(int(float(environ['EASYBUILD_JOB_MAX_WALLTIME']) * 60))  # hours -> minutes
    try:
        gpus = int(pick('gpus_per_job') or 0)
        cpus = pick('cpus_per_job', 'EASYBUILD_JOB_CORES')
        cpus = int(cpus) if cpus else None
    except ValueError as err:
        raise PluginError(ENV_PREFIX + '*', f'not a number: {err}') from None
    return JobOptions(pick('partition'), gpus, cpus, walltime, list(extra))


def _mount_of(path: str) -> tuple:
    """(mount point, fs type) of the file system holding path, from /proc/mounts (longest prefix wins)."""
    best = ('/', 'unknown')
    try:
        with open('/proc/mounts') as handle:
            for line in handle:
                parts = line.split()
                if len(parts) < 3:
                    continue
                point = parts[1].replace('\\040', ' ')
                if (path == point or path.startswith(point.rstrip('/') + '/')) and len(point) >= len(best[0]):
                    best = (point, parts[2])
    except OSError:
        pass
    return best


def refuse_node_local(path: str, what: str, shared: Iterable[str] = (),
                      environ: Optional[Mapping[str, str]] = None) -> None:
    """Raise PluginError (one line) when path is where only this node sees it: under /tmp, /dev/shm,
    /var/tmp or /run, or on a local file system type (ext4, xfs, tmpfs, overlay, ...).  Paths at or
    below a directory named in `shared` or in $EB_PYTORCH_CUDA_SHARED_PATHS (':'-separated: e.g. a
    local disk exported to the other nodes, or a single-node cluster) are accepted."""
    environ = os.environ if environ is None else environ
    real = os.path.realpath(path)
    roots = [os.path.realpath(root) for root in list(shared) + environ.get(SHARED_PATHS_VARIABLE, '').split(':')
             if root]
    if any(real == root or real.startswith(root.rstrip('/') + '/') for root in roots):
        return
    hint = f'use a path all nodes see, or add it to ${SHARED_PATHS_VARIABLE} if it is shared'
    for local in NODE_LOCAL_DIRS:
        if real == local or real.startswith(local + '/'):
            raise PluginError(path, f'{what} is node-local (under {local}); the jobs on other nodes cannot see it: '
                                    f'{hint}')
    point, fstype = _mount_of(real)
    if fstype in LOCAL_FS_TYPES:
        raise PluginError(path, f'{what} is on a node-local file system ({fstype} at {point}); the jobs on other '
                                f'nodes cannot see it: {hint}')


def pool_factory(settings: Optional[dict], environ: Mapping[str, str]) -> PoolFactory:
    """Slurm's jobpool.PoolFactory: JobPool with job_options(settings, environ), read once."""
    options = job_options(settings, environ)
    return lambda queue, python, jobs: JobPool(queue, options, python, jobs)


def write_batch_script(path: str, python: str) -> str:
    """The job's script: `#!<python>`, running the worker on the queue directory given as its argument."""
    if any(c.isspace() for c in python) or not os.path.isabs(python):
        raise PluginError(python, 'the Python for the test jobs must be an absolute path without spaces '
                                  '(it becomes the #! line of the batch script)')
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(path, 'w') as handle:
        handle.write(f'#!{python}\n'
                     '"""Batch script of one job of a spread PyTorch test step (written by eb_pytorch_cuda)."""\n'
                     'import sys\n'
                     f'sys.path.insert(0, {package_root!r})\n'
                     'from eb_pytorch_cuda.testsuite.spread.worker import main\n'
                     f'sys.exit(main({JOB_VARIABLES.worker_argv()!r} + sys.argv[1:]))\n')
    os.chmod(path, 0o755)
    return path


def sbatch_argv(options: JobOptions, script: str, queue_dir: str, name: str, output: str) -> List[str]:
    return ['sbatch', '--parsable', '--job-name', name, '--output', output, '--chdir', queue_dir,
            *options.sbatch_options(), script, queue_dir]


def submit(argv: List[str], env: Optional[dict] = None) -> str:
    """Run sbatch (argument list); return the job id."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    except (OSError, subprocess.SubprocessError) as err:
        raise PluginError('sbatch', f'could not be run: {err}') from None
    if done.returncode != 0:
        raise PluginError('sbatch', f"refused the job (exit {done.returncode}): {done.stderr.strip() or done.stdout}")
    job_id = done.stdout.strip().split(';')[0]
    if not job_id.isdigit():
        raise PluginError('sbatch', f'printed no job id: {done.stdout.strip()!r}')
    return job_id


def live_jobs(job_ids: Iterable[str]) -> Optional[Set[str]]:
    """The ones of job_ids that Slurm still runs or will run; None when squeue could not answer
    (a slurmctld restart must not make every job look dead)."""
    job_ids = [str(job) for job in job_ids]
    if not job_ids:
        return set()
    try:
        done = subprocess.run(['squeue', '-h', '-j', ','.join(job_ids), '-o', '%i %T'], capture_output=True,
                              text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        if 'Invalid job id' in done.stderr:  # all of them have left Slurm's memory
            return set()
        return None
    states: Dict[str, str] = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return {job for job in job_ids if states.get(job) in LIVE_STATES}


def cancel(job_ids: Iterable[str]) -> None:
    job_ids = [str(job) for job in job_ids]
    if job_ids:
        subprocess.run(['scancel', *job_ids], capture_output=True, timeout=120)


class JobPool:
    """The jobs of one spread test step on Slurm (spread/jobpool.JobPool): submits them, notices the ones that
    died (node failure, scancel, time limit: gone from squeue) and replaces them while suites are left unclaimed.

    The ids are kept in <queue>/jobs so that a rerun after a killed `eb` can cancel the jobs it left.
    """

    noun = 'Slurm job(s)'

    def __init__(self, queue: SuiteQueue, options: JobOptions, python: str, jobs: int,
                 max_replacements: Optional[int] = None):
        self.queue, self.options, self.jobs = queue, options, max(1, int(jobs))
        self.max_replacements = 2 * self.jobs + 2 if max_replacements is None else max_replacements
        self.script = write_batch_script(queue.path('worker-job.py'), python)
        self.live: List[str] = []
        self.gone: List[str] = []
        self.replacements = 0

    def asked(self) -> str:
        return ' '.join(self.options.sbatch_options()) or 'default options'

    def previous_jobs(self) -> List[str]:
        try:
            with open(self.queue.path('jobs')) as handle:
                return [line.strip() for line in handle if line.strip()]
        except OSError:
            return []

    def cancel_previous(self) -> List[str]:
        """Cancel the jobs a killed `eb` left behind and mark them dead (their claims go back)."""
        previous = self.previous_jobs()
        cancel(previous)
        for job in previous:
            self.queue.mark_dead(job)
        return previous

    def submit_one(self) -> str:
        number = len(self.live) + len(self.gone) + 1
        job = submit(sbatch_argv(self.options, self.script, self.queue.directory,
                                 f'pytorch-tests-{number}', self.queue.path('output', 'job-%j.out')))
        with open(self.queue.path('jobs'), 'a') as handle:
            handle.write(job + '\n')
        self.live.append(job)
        return job

    def start(self, suites_left: int) -> None:
        while len(self.live) < min(self.jobs, suites_left):
            self.submit_one()

    def check(self, suites_unclaimed: int) -> List[str]:
        """Mark the jobs that left Slurm dead; submit replacements while unclaimed suites outnumber the
        live jobs' capacity.  Returns the jobs found dead now."""
        still = live_jobs(self.live)
        if still is None:
            return []
        died = [job for job in self.live if job not in still]
        for job in died:
            self.queue.mark_dead(job)
            self.live.remove(job)
            self.gone.append(job)
        while suites_unclaimed > 0 and len(self.live) < self.jobs:
            if self.replacements >= self.max_replacements:
                last = self.queue.path('output', f'job-{self.gone[-1]}.out') if self.gone else self.queue.directory
                raise PluginError(last, f'{len(self.gone)} test jobs ended with suites still left '
                                        f'({self.replacements} replacements already): see the job output')
            self.replacements += 1
            self.submit_one()
            suites_unclaimed -= 1
        return died

    def finish(self) -> None:
        """Cancel what is still queued (a replacement that never started, a worker with nothing left)."""
        cancel(self.live)
