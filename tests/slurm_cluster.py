"""A real single-node Slurm (Debian's slurm-wlm and munge) started for the tests and stopped after them.

Facts from docs/design.md: slurm.conf with ProctrackType=proctrack/linuxproc, TaskPlugin=task/none,
SlurmUser=root; cgroup.conf with CgroupPlugin=cgroup/v1; munged runs as the munge user.  The one node
declares JOB_SLOTS CPUs (at least the machine's; SlurmdParameters=config_overrides lets slurmd accept
more than the hardware has), so that several one-CPU jobs run at once, as on several nodes: what the
spread test step needs.  The configuration lives in a temporary directory (SLURM_CONF points at it).
`running_slurm(directory)` is the same cluster for scripts (benchmarks/bench_slurm_spread.py).  Its
daemons listen on free ports of their own (SlurmctldPort, SlurmdPort), so a second test Slurm on the
same host (another session, another checkout) neither blocks this one nor is stopped by it.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager

import pytest
from environment import missing
from procs import runs_program

MUNGE_KEY = '/etc/munge/munge.key'
MUNGE_PIDFILE = '/run/munge/munged.pid'
JOB_SLOTS = max(4, os.cpu_count() or 1)  # one-CPU jobs that run at once


def _running(name):
    return subprocess.run(['pgrep', '-x', name], capture_output=True).returncode == 0


def _alive(pidfile):
    try:
        return os.path.exists(f'/proc/{int(open(pidfile).read().strip())}')
    except (OSError, ValueError):
        return False


def _free_port():
    with socket.socket() as probe:
        probe.bind(('', 0))
        return probe.getsockname()[1]


def _write_config(directory, slots=JOB_SLOTS):
    host = socket.gethostname()
    spool = os.path.join(directory, 'spool')
    os.makedirs(os.path.join(spool, 'ctld'), exist_ok=True)
    os.makedirs(os.path.join(spool, 'd'), exist_ok=True)
    conf = os.path.join(directory, 'slurm.conf')
    with open(conf, 'w') as handle:
        handle.write(f'''ClusterName=ebpytorchcuda
SlurmctldHost={host}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation={spool}/ctld
SlurmdSpoolDir={spool}/d
SlurmctldPidFile={directory}/slurmctld.pid
SlurmdPidFile={directory}/slurmd.pid
SlurmctldLogFile={directory}/slurmctld.log
SlurmdLogFile={directory}/slurmd.log
ReturnToService=2
SlurmdParameters=config_overrides
NodeName={host} CPUs={slots} State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
''')
    with open(os.path.join(directory, 'cgroup.conf'), 'w') as handle:
        handle.write('CgroupPlugin=cgroup/v1\n')
    return conf


class SlurmUnavailable(Exception):
    pass


@contextmanager
def running_slurm(directory, slots=JOB_SLOTS):
    """Start munged (unless running), slurmctld and slurmd (as root) with the configuration in directory;
    yield the SLURM_CONF path (also set in os.environ); stop what was started."""
    with _running_slurm(directory, slots) as conf:
        yield conf


@contextmanager
def _running_slurm(directory, slots):
    for sbin in ('/usr/sbin', '/sbin'):  # the daemons live there, which a non-login PATH may lack
        if sbin not in os.environ['PATH'].split(os.pathsep):
            os.environ['PATH'] += os.pathsep + sbin
    if os.geteuid() != 0 or not shutil.which('slurmctld') or not shutil.which('munged'):
        raise SlurmUnavailable('needs root and Debian slurm-wlm + munge: run bash tools/setup.sh as root')
    conf = _write_config(directory, slots)
    previous = os.environ.get('SLURM_CONF')
    os.environ['SLURM_CONF'] = conf
    started_munge = False
    if not _running('munged'):
        if not os.path.exists(MUNGE_KEY):
            subprocess.run(['mungekey', '--create', '--keyfile', MUNGE_KEY], check=True)
        for path in ('/run/munge', '/var/log/munge', '/var/lib/munge', '/etc/munge'):
            os.makedirs(path, exist_ok=True)
            shutil.chown(path, 'munge', 'munge')
        shutil.chown(MUNGE_KEY, 'munge', 'munge')
        os.chmod(MUNGE_KEY, 0o400)
        subprocess.run(['runuser', '-u', 'munge', '--', 'munged'], check=True)
        started_munge = True
    try:
        subprocess.run(['slurmctld'], check=True)
        subprocess.run(['slurmd'], check=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            state = subprocess.run(['sinfo', '-h', '-o', '%t'], capture_output=True, text=True).stdout.strip()
            if state in ('idle', 'mix', 'alloc'):
                break
            time.sleep(1)
        else:
            raise SlurmUnavailable(f'Slurm did not come up (sinfo: {state!r}); see {directory}/slurmctld.log')
        for daemon in ('slurmctld', 'slurmd'):  # ours, not some other controller answering
            if not _alive(os.path.join(directory, f'{daemon}.pid')):
                raise SlurmUnavailable(f'{daemon} is not running; see {directory}/{daemon}.log')
        yield conf
    finally:
        subprocess.run(['scontrol', 'shutdown'], capture_output=True)
        for daemon in ('slurmctld', 'slurmd'):
            _wait_gone(os.path.join(directory, f'{daemon}.pid'), daemon)
        if started_munge:  # by the pid munged wrote, only the one started here
            _wait_gone(MUNGE_PIDFILE, 'munged', timeout=30, signal_first=signal.SIGTERM)
        if previous is None:
            os.environ.pop('SLURM_CONF', None)
        else:
            os.environ['SLURM_CONF'] = previous


@pytest.fixture(scope='session')
def slurm(tmp_path_factory):
    """A running single-node Slurm with JOB_SLOTS one-CPU job slots; yields the SLURM_CONF path."""
    try:
        with running_slurm(str(tmp_path_factory.mktemp('slurm'))) as conf:
            yield conf
    except SlurmUnavailable as err:
        missing(str(err))


def _wait_gone(pidfile, name, timeout=30, signal_first=None):
    """Wait for daemon name, the process of pidfile, to end (sending it signal_first first); SIGKILL it after
    timeout.  Only while that pid still runs name: once it ended its pid may be another process's (pid_max 32768),
    which a signal here would kill (another pytest worker's test, at the end of a session)."""
    try:
        pid = int(open(pidfile).read().strip())
    except (OSError, ValueError):
        return
    if signal_first is not None and runs_program(pid, name):
        os.kill(pid, signal_first)
    deadline = time.time() + timeout
    while time.time() < deadline and runs_program(pid, name):
        time.sleep(0.5)
    if runs_program(pid, name):
        os.kill(pid, 9)


def submitted_job_ids(eb_output):
    """Job ids from EasyBuild's 'List of submitted jobs (N): name (module): id; ...' line."""
    line = next((text for text in eb_output.splitlines() if 'List of submitted jobs' in text), '')
    return re.findall(r': (\d+)(?:;|$)', line)


def wait_for_jobs(job_ids, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        queued = subprocess.run(['squeue', '-h', '-j', ','.join(job_ids), '-o', '%i'], capture_output=True,
                                text=True).stdout.split()
        if not queued:
            return
        time.sleep(2)
    raise AssertionError(f'jobs {job_ids} still queued after {timeout}s')
