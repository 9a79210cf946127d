#!/usr/bin/env bash
# The 2.1-line harness tree of tools/setup.sh: ../shared/pytorch-2.1-harness (rebuilt from public pytorch/pytorch
# files, its PROVENANCE.md) copied to .venvs/pytorch-2.1-harness, plus two real suites of Debian's 2.6.0 tree.
# Its own script so that CI can run the path of a clone with nothing beside it (.ci/run: HARNESS21_SHARED
# pointing nowhere, HARNESS21_TREE into a temporary directory) without running the whole set-up again.
#   HARNESS21_SHARED  the shared tree (default ../shared/pytorch-2.1-harness)
#   HARNESS21_TREE    where it goes (default .venvs/pytorch-2.1-harness)
#   HARNESS_TREE      Debian's 2.6.0 tree (default .venvs/pytorch-src/pytorch-v2.6.0)
set -euo pipefail
cd "$(dirname "$0")/.."
HARNESS_TREE=${HARNESS_TREE:-.venvs/pytorch-src/pytorch-v2.6.0}
# A clone with nothing beside it (no ../shared) has no such tree: the block is left out with one line saying so,
# and the tests that need the tree skip with that reason (they fail under CI, where ../shared is always laid).
HARNESS21_SHARED=${HARNESS21_SHARED:-../shared/pytorch-2.1-harness}
HARNESS21_TREE=${HARNESS21_TREE:-.venvs/pytorch-2.1-harness}
if [ ! -f "$HARNESS21_TREE/.complete" ] && [ ! -f "$HARNESS21_SHARED/test/run_test.py" ]; then
    echo "setup: left out the 2.1-line harness ($HARNESS21_TREE): it is copied from $HARNESS21_SHARED, which this clone does not have beside it; the tests that need it skip" >&2
elif [ ! -f "$HARNESS21_TREE/.complete" ]; then
    rm -rf "$HARNESS21_TREE"
    cp -r "$HARNESS21_SHARED" "$HARNESS21_TREE"
    chmod -R u+w "$HARNESS21_TREE"
    # two more real suites, from Debian's pytorch 2.6.0 source (above): these two run unchanged under torch 2.1.2
    # (15 and 11 tests, all passing on a CPU), as the shared tree's own test_license.py comes from there too
    for suite in test_function_schema test_native_functions; do
        cp "$HARNESS_TREE/test/$suite.py" "$HARNESS21_TREE/test/"
    done
    touch "$HARNESS21_TREE/.complete"
fi
