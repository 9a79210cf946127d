"""patch.plan on real gcc-built libraries (the cuDNN stand-in and a libtorch_cuda.so with DT_RPATH to it),
judged by the real glibc loader: what is planned, applied and proven, from plain values only."""

import os
import shutil

from helpers import run_loadcheck
from eb_pytorch_cuda.elf.reader import read_elf
from eb_pytorch_cuda.patch.plan import Settings, apply_plan, check_plan, find_libraries, plan_library, planned_sonames


def test_plan_apply_check_for_each_cudnn_major(standin):
    plan = plan_library(standin.torch_lib, Settings(cudnn_root=standin.cudnn_prefix, environ={}))
    assert plan.major == standin.major and list(plan.add) == standin.leaves and not plan.absent
    assert plan.cudnn_dirs == (os.path.realpath(standin.cudnn_lib),)
    assert run_loadcheck(standin.loadcheck, standin.torch_lib).returncode != 0  # the failure before
    assert list(apply_plan(plan).added) == standin.leaves
    assert apply_plan(plan).added == []  # idempotent
    assert read_elf(standin.torch_lib).needed.count(standin.leaves[0]) == 1
    checks, problems = check_plan(plan, load=True, expect_dir=standin.cudnn_prefix)
    assert not problems and all(check.mapped for check in checks)
    assert run_loadcheck(standin.loadcheck, standin.torch_lib).returncode == 0


def test_requested_sonames_come_from_easyconfig_then_environment_then_site(standin8):
    env = {'EB_PYTORCH_CUDA_CUDNN_NEEDED': 'libcudnn_ops_train.so.8'}
    site = ['libcudnn_adv_train.so.8']
    assert plan_library(standin8.torch_lib, Settings(site_value=site, environ={})).add == ('libcudnn_adv_train.so.8',)
    assert plan_library(standin8.torch_lib, Settings(site_value=site, environ=env)).add == ('libcudnn_ops_train.so.8',)
    from_easyconfig = Settings(easyconfig_value={8: ['libcudnn_cnn_infer.so.8', 'libcudnn_missing.so.8']},
                               site_value=site, environ=env)
    plan = plan_library(standin8.torch_lib, from_easyconfig)
    assert plan.add == ('libcudnn_cnn_infer.so.8',) and plan.absent == ('libcudnn_missing.so.8',)
    assert plan_library(standin8.torch_lib, Settings(environ={'EB_PYTORCH_CUDA_CUDNN_NEEDED': ''})).add == ()
    assert planned_sonames('8.9.2.26', Settings(environ={})) == (8, ['libcudnn_cnn_train.so.8'])


def test_a_library_without_cudnn_gets_no_plan_and_copies_are_found_once(standin8, tmp_path):
    tree = tmp_path / 'tree'
    other = tree / 'cpu' / 'lib' / 'libtorch_cuda.so'
    other.parent.mkdir(parents=True)
    shutil.copy(standin8.cudnn_lib + '/libcudnn_cnn_train.so.8', other)  # an ELF library not linking libcudnn.so.N
    assert plan_library(str(other)).major is None and apply_plan(plan_library(str(other))) is None
    (tree / 'alias').mkdir()
    (tree / 'alias' / 'libtorch_cuda.so').symlink_to(other)
    found = find_libraries([str(tree), None, str(tmp_path / 'missing')])
    assert len(found) == 1 and os.path.realpath(found[0]) == str(other)
