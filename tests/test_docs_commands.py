"""The shell commands of README.md and docs/user-guide.md, run as written: a documented command that stops
working fails here.

Each `bash` code block of the two pages is read from the Markdown (a line ending in a backslash continues on the
next; comment lines are not commands) and each of its commands is either in RUN, and then run exactly as it is
written, copied from the page into `bash -e -o pipefail -c` (as a user pastes it into a shell: the pages' commands
use `>`, `&&`, globs and VAR=value prefixes, so here a shell is the point), or in NOT_RUN with the reason it
cannot run here.  A command on the pages that is in neither fails the test, as does an entry no page holds any
more: the lists follow the pages.  `python` blocks (a site's hooks file) are code, not commands.

Where they run: a scratch directory laid out like this repository (a link to each of its top-level entries, so
that `.venvs/...`, `tools/...` resolve as in a checkout, while what the commands write, `pytorch-cuda.cfg`,
`demo/`, lands in the scratch directory), in the order of the pages, README first; each command once, since the
user guide repeats the README's.  Their environment is the one the pages describe: `eb` and `eb-pytorch-cuda` of
.venvs/eb-5.4.1 first on PATH (as after `pip install .` into eb's Python, or that venv activated), Lmod found
through $LMOD_CMD (the prerequisite the pages name), no EasyBuild or EESSI settings of the shell that runs the
tests, HOME and TMPDIR in the scratch directory (eb's default prefix, the plain demo's directory); as root,
EasyBuild's own allow-root option in the environment (the pages are written for a user).
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

from eb_runner import LMOD_CMD, REPO, eb_venv

PAGES = ('README.md', 'docs/user-guide.md')
EC = 'PyTorch-2.1.2-foss-2023a-CUDA-12.1.1.eb'
CFG = 'pytorch-cuda.cfg'
DEMO_INSTALL = 'demo/easybuild/software/PyTorch/2.1.2-standin-easyblock'

# run as written, in this order
RUN = (
    '.venvs/eb-5.4.1/bin/eb-pytorch-cuda demo',
    f'eb-pytorch-cuda config > {CFG}',
    f'EESSI_SOFTWARE_SUBDIR=x86_64/intel/haswell eb --configfiles={CFG} -x {EC} --cuda-compute-capabilities=8.0,9.0',
    'eb-pytorch-cuda demo --workdir demo',
    f'eb-pytorch-cuda report {DEMO_INSTALL}/easybuild/pytorch-test-results.json',
    'eb-pytorch-cuda check-needed demo/easybuild/software/PyTorch/*/lib/python3*/site-packages/torch/lib/'
    'libtorch_cuda.so libcudnn_cnn_train.so.8 --expect-dir demo/easybuild/software/cuDNN/8.9.2.26-standin/lib --load',
    f'eb-pytorch-cuda doctor {DEMO_INSTALL}',
    'eb-pytorch-cuda cudnn-catalog',
    f'eb-pytorch-cuda config --entrypoints > {CFG}',
)

REAL_BUILD = ("a real build of PyTorch 2.1.2 and its dependencies (sources from the internet, hours); its plan is "
              "the dry run, which is run")
NOT_RUN = {
    'bash tools/setup.sh': 'the set-up itself (as root: Debian packages, venvs, GB of wheels); CI runs it first',
    '.venvs/eb-5.4.1/bin/python -m pytest -n 3 --dist loadgroup': 'the test suite itself, this test among them',
    'python3 -m venv v && v/bin/pip install easybuild==5.4.1 . && v/bin/eb-pytorch-cuda demo':
        'installs from PyPI; the same venv, made the same way by tools/setup.sh (.venvs/stock-5.4.1), runs the '
        'demo in tests/test_demo.py',
    f'eb --configfiles={CFG} {EC} --robot': REAL_BUILD,
    f'EESSI_SOFTWARE_SUBDIR=x86_64/intel/haswell eb --configfiles={CFG} --robot --job --job-backend=Slurm '
    f'--job-cores=16 {EC}': 'submits the real build to Slurm (tests/test_slurm_jobs.py submits the demo build)',
    f'eb --configfiles={CFG} --robot --easystack easyconfigs/easystack-pytorch-cuda.yml [--experimental] '
    '[--job --job-backend=Slurm]': 'placeholders in brackets; a real build (tests/test_slurm_jobs.py runs the '
                                   "demo's easystack)",
    'EB_PYTORCH_CUDA_SLURM_PARTITION=gpu EB_PYTORCH_CUDA_SLURM_GPUS_PER_JOB=4 EB_PYTORCH_CUDA_SLURM_TIME_LIMIT='
    f'24:00:00 \\\n    eb --configfiles={CFG} --try-amend=test_suite_jobs=8 {EC}':
        'a real build on a Slurm partition named gpu (tests/test_slurm_spread.py spreads suites over real jobs)',
    f'eb --hooks hooks/eb_hooks.py {EC}': REAL_BUILD,
    "pip install .    # into eb's Python: registers our hooks (easybuild.hooks) and EB_PyTorch (easybuild.easyblock)":
        'installs into the environment that runs the tests (tools/setup.sh makes .venvs/stock-5.4.1 so)',
    f'eb --configfiles={CFG} [--hooks=SITE_HOOKS.py] {EC} --robot': 'a placeholder in brackets; a real build',
    f'eb --include-easyblocks easybuild/easyblocks/p/pytorch.py --hooks hooks/eb_hooks.py {EC}': REAL_BUILD,
    f'eb --configfiles={CFG} --hooks=$EESSI_SCRIPTS/eb_hooks.py {EC} --robot':
        "a real build, with EESSI's scripts checked out ($EESSI_SCRIPTS); tests/test_entry_points.py dry-runs it "
        "with EESSI's real hooks file",
    'python3 tools/validate-gpu/validate_gpu.py --workdir /tmp/vgpu --out results/': 'needs an NVIDIA GPU',
}


def page_commands(page):
    """The commands of page's bash code blocks, as written (a continued line with its backslash and newline)."""
    text = (REPO / page).read_text(encoding='utf-8')
    commands = []
    for body in re.findall(r'^```bash\n(.*?)^```', text, re.M | re.S):
        current = ''
        for line in body.splitlines():
            current = f'{current}\n{line}' if current else line
            if line.endswith('\\'):
                continue
            if current.strip() and not current.lstrip().startswith('#'):
                commands.append(current)
            current = ''
    return commands


def all_commands():
    """Every command of the pages, each once, in the pages' order."""
    return list(dict.fromkeys(command for page in PAGES for command in page_commands(page)))


def test_every_command_of_the_pages_is_run_or_says_why_not():
    commands = all_commands()
    unlisted = [command for command in commands if command not in RUN and command not in NOT_RUN]
    assert not unlisted, f'add each to RUN or NOT_RUN (with the reason): {unlisted}'
    gone = [command for command in (*RUN, *NOT_RUN) if command not in commands]
    assert not gone, f'no page has these any more: {gone}'
    assert not set(RUN) & set(NOT_RUN)
    assert [command for command in commands if command in RUN] == list(RUN)  # RUN follows the pages' order


@pytest.fixture
def scratch(tmp_path):
    """A directory laid out like the repository, and the environment the pages assume."""
    venv = eb_venv('5.4.1')
    work = tmp_path / 'work'
    work.mkdir()
    for entry in REPO.iterdir():
        if entry.name != '.git':
            (work / entry.name).symlink_to(entry)
    (tmp_path / 'home').mkdir()
    (tmp_path / 'tmp').mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('EASYBUILD_', 'EBROOT', 'EBVERSION', 'EESSI_')) and k != 'EPREFIX'}
    env.update(PATH=f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}", LMOD_CMD=LMOD_CMD,
               HOME=str(tmp_path / 'home'), TMPDIR=str(tmp_path / 'tmp'))  # the plain demo's directory goes there
    if os.geteuid() == 0:
        env['EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES'] = '1'
    return work, env


def test_the_commands_of_the_pages_run_as_written(scratch):
    work, env = scratch
    outputs = {}
    for command in RUN:
        done = subprocess.run(['bash', '-e', '-o', 'pipefail', '-c', command], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)
        out = done.stdout + done.stderr
        assert done.returncode == 0, f'{command}\n{out[-4000:]}'
        # eb's dry run turns an error into a warning and exits 0 ("ignoring error"): none may be there
        assert 'ignoring error' not in out and not re.search(r'^ERROR', out, re.M), f'{command}\n{out[-4000:]}'
        outputs[command] = out
    # what the pages say next to the commands
    assert '== verdict: PASS' in outputs[RUN[0]]
    assert 'use-entrypoints = True' in (work / CFG).read_text()  # the last command's file
    dry_run = outputs[RUN[2]]
    assert "*** DRY RUN using 'EB_PyTorch' easyblock" in dry_run and 'budget for unknown failures: 0' in dry_run
    assert '5 suites, 2 failed tests' in outputs[RUN[4]] and 'verdict: PASS' in outputs[RUN[4]]
    assert 'mapped by a real load' in outputs[RUN[5]] and 'nothing found' in outputs[RUN[6]]
    assert Path(work / DEMO_INSTALL).is_dir() and not (REPO / CFG).exists() and not (REPO / 'demo').exists()


def test_the_pages_name_what_a_pip_install_does_not_bring():
    # EasyBuild's own words where each is missing (measured in .venvs/stock-5.4.1, a shell without Lmod's
    # profile, no PyYAML), so that a user who meets them finds the page
    for page in PAGES:
        text = ' '.join((REPO / page).read_text(encoding='utf-8').split())  # as rendered: a line break is a space
        assert "'lmod' command is not available" in text and 'export LMOD_CMD=' in text, page
        assert 'pip install .[easystack]' in text and 'None of the specified modules (yaml) is available' in text, page
    guide = (REPO / 'docs' / 'user-guide.md').read_text(encoding='utf-8')
    easystack_block = next(block for block in re.findall(r'^```bash\n(.*?)^```', guide, re.M | re.S)
                           if '--easystack' in block)
    assert 'PyYAML: pip install .[easystack]' in easystack_block
