"""tools/setup-harness21.sh, the set-up's only block that needs ../shared: on a clone with nothing beside it
it leaves the 2.1-line harness out in one line and exits 0; with the shared tree it copies it."""

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / 'tools' / 'setup-harness21.sh'


def _run(tmp_path, shared, debian_tree=None):
    env = dict(os.environ, HARNESS21_SHARED=str(shared), HARNESS21_TREE=str(tmp_path / 'tree'),
               HARNESS_TREE=str(debian_tree or tmp_path / 'no-debian-tree'))
    return subprocess.run(['bash', str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def test_without_shared_beside_the_clone_it_says_what_it_left_out_and_exits_0(tmp_path):
    done = _run(tmp_path, tmp_path / 'nowhere')
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and done.stdout == '', (done.stdout, done.stderr)
    assert 'left out the 2.1-line harness' in lines[0] and str(tmp_path / 'nowhere') in lines[0]
    assert not (tmp_path / 'tree').exists()


def test_with_a_shared_tree_it_is_copied_writable_with_the_two_debian_suites(tmp_path):
    shared = tmp_path / 'shared'
    (shared / 'test').mkdir(parents=True)
    (shared / 'test' / 'run_test.py').write_text('# the harness\n')
    os.chmod(shared / 'test' / 'run_test.py', 0o444)  # shared/ is laid without write bits
    debian = tmp_path / 'debian'
    (debian / 'test').mkdir(parents=True)
    for suite in ('test_function_schema', 'test_native_functions'):
        (debian / 'test' / f'{suite}.py').write_text(f'# {suite}\n')
    done = _run(tmp_path, shared, debian)
    assert done.returncode == 0, done.stderr
    tree = tmp_path / 'tree'
    assert (tree / '.complete').is_file()
    assert sorted(p.name for p in (tree / 'test').iterdir()) == ['run_test.py', 'test_function_schema.py',
                                                                 'test_native_functions.py']
    assert os.access(tree / 'test' / 'run_test.py', os.W_OK)
    again = _run(tmp_path, tmp_path / 'nowhere')  # made once: a later run without shared keeps it, silently
    assert again.returncode == 0 and again.stderr == '' and (tree / '.complete').is_file()
