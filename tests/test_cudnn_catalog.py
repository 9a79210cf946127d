"""The cuDNN catalog: defaults per major version, site/easyconfig choices, filtering by present files."""

import pytest

from helpers import run_main
from eb_pytorch_cuda.cudnn import (CATALOG, DEFAULT_NEEDED, ENV_VARIABLE, cudnn_major, filter_present,
                                   requested_sonames, unknown_sonames)


def test_defaults_are_the_verified_fixes():
    assert DEFAULT_NEEDED[8] == ('libcudnn_cnn_train.so.8',)
    assert DEFAULT_NEEDED[9] == ('libcudnn_engines_precompiled.so.9', 'libcudnn_engines_runtime_compiled.so.9')
    assert all(set(DEFAULT_NEEDED[m]) <= set(CATALOG[m]) for m in DEFAULT_NEEDED)


def test_major_version_comes_from_the_needed_entry():
    assert cudnn_major(('libc.so.6', 'libcudnn.so.8')) == 8
    assert cudnn_major(('libcudnn.so.9', 'libcudnn_graph.so.9')) == 9
    assert cudnn_major(('libc.so.6',)) is None


def test_precedence_easyconfig_then_environment_then_site_then_default():
    env = {ENV_VARIABLE: 'libcudnn_ops.so.9,libcudnn_cnn.so.9'}
    assert requested_sonames(9, environ={}) == list(DEFAULT_NEEDED[9])
    assert requested_sonames(9, site_value=['libcudnn_adv.so.9'], environ={}) == ['libcudnn_adv.so.9']
    assert requested_sonames(9, site_value=['libcudnn_adv.so.9'], environ=env) == ['libcudnn_ops.so.9',
                                                                                   'libcudnn_cnn.so.9']
    assert requested_sonames(9, easyconfig_value=['libcudnn_graph.so.9'], environ=env) == ['libcudnn_graph.so.9']


def test_dict_values_cover_both_majors_and_lists_for_another_major_do_not_apply():
    setting = {8: ['libcudnn_ops_train.so.8'], 9: ['libcudnn_heuristic.so.9']}
    assert requested_sonames(8, easyconfig_value=setting, environ={}) == ['libcudnn_ops_train.so.8']
    assert requested_sonames(9, site_value=setting, environ={}) == ['libcudnn_heuristic.so.9']
    assert requested_sonames(8, easyconfig_value=['libcudnn_graph.so.9'], environ={}) == list(DEFAULT_NEEDED[8])
    assert requested_sonames(8, easyconfig_value=[], environ={}) == []


def test_filtering_drops_sub_libraries_missing_from_the_installation(tmp_path):
    (tmp_path / 'libcudnn_engines_precompiled.so.9').write_bytes(b'')
    present, absent = filter_present(['libcudnn_engines_precompiled.so.9', 'libcudnn_engines_tensor_ir.so.9'],
                                     [str(tmp_path)])
    assert present == ['libcudnn_engines_precompiled.so.9'] and absent == ['libcudnn_engines_tensor_ir.so.9']
    assert unknown_sonames(9, ['libcudnn_bogus.so.9', 'libcudnn_ops.so.9']) == ['libcudnn_bogus.so.9']


def test_catalog_command_lists_choices_and_defaults():
    out = run_main('cudnn-catalog', check_rc=0).stdout
    assert 'libcudnn_cnn_train.so.8  (default NEEDED entry)' in out
    assert 'libcudnn_engines_tensor_ir.so.9\n' in out
    assert ENV_VARIABLE in out


def test_the_catalog_is_one_shipped_data_file_read_by_everything():
    import json
    import re
    from pathlib import Path

    import eb_pytorch_cuda
    from eb_pytorch_cuda import cudnn
    data = json.loads((Path(eb_pytorch_cuda.__file__).parent / 'cudnn_catalog.json').read_text())
    for major, facts in data['majors'].items():
        assert CATALOG[int(major)] == tuple(facts['sublibraries'])
        assert DEFAULT_NEEDED[int(major)] == tuple(facts['default_needed'])
        assert cudnn.runpath_note(int(major)) == facts['runpath']
    assert ENV_VARIABLE == data['env_variable']
    assert cudnn.DLOPEN_EDGES['libcudnn_cnn_infer.so.8'] == ('libcudnn_cnn_train.so.8',)
    source = (Path(eb_pytorch_cuda.__file__).parent / 'loader' / 'doctor.py').read_text()
    assert not re.search(r"""['"]libcudnn_?\w*\.so\.\d""", source)  # doctor asks cudnn.py: no sonames of its own
    pyproject = (Path(__file__).resolve().parent.parent / 'pyproject.toml').read_text()
    assert '"cudnn_catalog.json"' in pyproject  # package data: present in a wheel, not only in a checkout


def test_cudnn_9_probes_like_cudnn_and_cudnn_8_asks_for_the_soname_only():
    from eb_pytorch_cuda.cudnn import is_cudnn, probe_names
    expected = ['libcudnn_graph.so.9.19.0', 'libcudnn_graph.so.9.19', 'libcudnn_graph.so.9', 'libcudnn_graph.so']
    assert probe_names('libcudnn_graph.so.9', '9.19.0') == expected
    assert probe_names('libcudnn_graph.so.9') == ['libcudnn_graph.so.9', 'libcudnn_graph.so']
    assert probe_names('libcudnn_cnn_train.so.8') == ['libcudnn_cnn_train.so.8']
    assert probe_names('libnccl.so.2') == ['libnccl.so.2']
    assert is_cudnn('libcudnn.so.9') and is_cudnn('libcudnn_ops.so.9') and not is_cudnn('libcudnnx.so')


@pytest.mark.parametrize('value,problem', [
    ({8: 'libcudnn_cnn_train.so.8'}, "my.eb: cudnn_needed[8] must be a list of sonames such as"),  # was: characters
    (5, 'my.eb: cudnn_needed must be a list of sonames such as'),  # was: a TypeError traceback
    ('libcudnn_cnn_train.so.8', "got 'libcudnn_cnn_train.so.8' (or a dict"),  # was: the default, silently
    ({'9': ['libcudnn_cnn.so.9']}, "cudnn_needed: key '9' must be a cuDNN major version"),
    ({True: ['libcudnn_cnn.so.9']}, 'cudnn_needed: key True must be a cuDNN major version'),
    ({-1: []}, 'cudnn_needed: key -1 must be a cuDNN major version'),  # was: accepted, the defaults added
    ({0: ['libcudnn_cnn.so.9']}, 'cudnn_needed: key 0 must be a cuDNN major version'),
    ({9: None}, 'cudnn_needed[9] must be a list of sonames'),
    (['libcudnn_cnn.so.9', 'a b'], "cudnn_needed 'a b' is not a soname"),
    ([''], "cudnn_needed '' is not a soname"),
    ([9], 'cudnn_needed 9 is not a soname'),
])
def test_a_cudnn_needed_of_the_wrong_form_is_refused_naming_the_parameter(value, problem):
    from eb_pytorch_cuda.errors import PluginError
    from eb_pytorch_cuda.patch.plan import check_cudnn_needed
    with pytest.raises(PluginError) as caught:
        check_cudnn_needed(value, 'my.eb')
    assert problem in str(caught.value)


@pytest.mark.parametrize('value', [None, [], (), ['libcudnn_cnn.so.9'], {8: ['libcudnn_cnn_train.so.8'], 9: []}, {}])
def test_each_form_of_cudnn_needed_is_accepted_unchanged(value):
    from eb_pytorch_cuda.patch.plan import check_cudnn_needed
    assert check_cudnn_needed(value, 'my.eb') is value
