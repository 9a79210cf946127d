#!/usr/bin/env bash
# One line: the sha256 of this repository's src/ and setup.cfg (every file's path and digest, sorted by path),
# which make_kit.sh puts in the kit with the package's wheel and h200_round.sh compares with the tree it runs in.
set -euo pipefail
cd "$(dirname "$0")/../.."
find src setup.cfg -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*.egg-info/*' -print0 | LC_ALL=C sort -z \
    | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
