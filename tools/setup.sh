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

for version in $EB_VERSIONS; do
    venv=.venvs/eb-$version
    [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip setuptools wheel 2>&1 \
        | grep -v '^WARNING: Location' || true
    "$venv/bin/python" -m pip install -q --disable-pip-version-check \
        "easybuild-framework==$version" "easybuild-easyblocks==$version" "easybuild-easyconfigs==$version" -e '.[test]' 2>&1 \
        | grep -v '^WARNING: Location' || true
    "$venv/bin/eb-pytorch-cuda" --version >/dev/null
    PATH="$PWD/$venv/bin:$PATH" "$venv/bin/eb" --version
done

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
