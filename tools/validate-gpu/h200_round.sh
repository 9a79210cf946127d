#!/usr/bin/env bash
# Issue 33's record on the GPU machine, over as many device calls as it takes (one call may run 10 minutes; the
# machine stays held 30 s between calls): the first call installs the carried kit (.gpu/, tools/validate-gpu/
# make_kit.sh) and starts eb_gpu_run.py in its own session (setsid: it outlives the call); every call then waits
# until it ends or WAIT seconds pass, never blind, and copies what is there to $OUT (record.tar.gz, results.json,
# summary.md).  A second call never starts a second run while the first lives.
#   run(carry=[".gpu"]): bash tools/validate-gpu/h200_round.sh --phase unpatched --phase patched --suites ... \
#       --pytest-args=-k --pytest-args=EXPR [--unpatched-pytest-args=-k --unpatched-pytest-args=EXPR]
set -uo pipefail
WORK=${WORK:-/tmp/h200-round}
WAIT=${WAIT:-540}
REC=$WORK/rec
KIT=${KIT:-.gpu}  # make_kit.sh's; another only for a rehearsal on this side (PYVER= of make_kit.sh)
if [ ! -e "$WORK/pid" ]; then
    mkdir -p "$REC"
    [ -n "$(ls "$KIT"/debs/*.deb 2>/dev/null)" ] || { echo "h200_round: "$KIT"/debs has no .deb: carry .gpu" >&2; exit 2; }
    [ "$(cat "$KIT/src.sha256" 2>/dev/null)" = "$(bash tools/validate-gpu/src_digest.sh)" ] || {
        echo "h200_round: "$KIT"'s eb_pytorch_cuda wheel was built from another src/: run tools/validate-gpu/make_kit.sh again" >&2
        exit 2; }
    python3 tools/validate-gpu/install_carried.py "$KIT"/whl "$WORK/site" > "$WORK/install.log" 2>&1 \
        || { cat "$WORK/install.log"; exit 1; }
    if PYTHONPATH="$WORK/site" python3 -c 'import xmlrunner' 2>/dev/null; then
        # upstream EB_PyTorch's configure step would patch torch/testing/_internal/common_utils.py, which a binary
        # harness tree lacks (eb fails at once: measured 2026-12-02)
        echo "h200_round: xmlrunner is importable from the kit: drop unittest-xml-reporting from "$KIT"/whl" >&2; exit 2
    fi
    nvidia-smi -L
    # the benchmark's scripts as they are now: it starts after the eb phases, in a later device call, whose copy of
    # the working tree may not be the one this call's process started in
    mkdir -p "$WORK/scripts" && cp tools/validate-gpu/bench_python.py tools/validate-gpu/binary_torch.py \
        tools/validate-gpu/probe_cuda.py tools/validate-gpu/eb_probe_plugin.py benchmarks/bench_gpu_node.py \
        "$WORK/scripts/" && rm -rf "$WORK/bench-tree" && cp -r "$KIT/harness" "$WORK/bench-tree"
    # BENCH="conv cpu" (or one of them, or cpu-pool: bench_gpu_node.py's cases): after the eb phases,
    # benchmarks/bench_gpu_node.py on the machine's own torch (bench_python.py: a venv that sees it and the carried
    # test plugins, not the machine's pytest plugins)
    # NO_EB=1: the benchmark alone (BENCH=cpu NO_EB=1: docs/benchmarks.md's next round)
    # PLAIN_FROM=docs/validation/h200-2026-12-02-bench-cpu/bench-gpu-node.json: the cpu case's plain run measured
    # there (1413 s), not run again (the three runs of the cpu case do not fit one session's 30 device minutes); with
    # BENCH=gpu and no FALLBACK, the gpu case's plain run of an earlier session (RUNS=plain SEED_FROM_PLAIN=1 there,
    # its gpu-plain-results.json in bench-runs.tar.gz the PREVIOUS_FROM of ours here)
    [ -z "${PLAIN_FROM:-}" ] || PLAIN_FROM=$(realpath "$PLAIN_FROM")
    # BENCH=gpu: tools/validate-gpu/probe_cuda.py first chooses the CUDA selection on the node (its
    # gpu-selection.json: suites, -k expression, estimates); TARGET: the plain run's seconds it aims at.  BENCH=probe:
    # the probe alone (PROBE_SUITES: which suites, default probe_cuda.py's CANDIDATES), before any other case.
    # PROBES_FROM: earlier gpu-selection.json records of the node, their suites not probed again.  FALLBACK=cpu:
    # where the probe's selection does not reach TARGET, the gpu case gives way to that case (PLAIN_FROM is its plain
    # run: the gpu case's plain run is always measured)
    [ -z "${PROBES_FROM:-}" ] || PROBES_FROM=$(realpath $PROBES_FROM | tr '\n' ' ')
    # GPU_SELECTION: a kept gpu-selection.json, the gpu case's selection without a probe; PREVIOUS_FROM: a kept
    # results JSON of ours on it (ours' first run plans with its times, as a second build would); RUNS: which runs
    # of the case, in the order they run (bench_gpu_node.py --runs: plain ours_auto ours_second; RUNS="ours_auto
    # plain" with PREVIOUS_FROM keeps ours whole where the session ends in the plain call); SEED_FROM_PLAIN=1: the
    # plain call writes JUnit reports and ours' first run plans with their times (bench_gpu_node.py
    # --seed-from-plain: plain and one seeded run of ours fit one session); RERUN=1: ours reruns each failed test
    # alone once, as the main easyconfig does (bench_gpu_node.py --rerun; default 0, as the kept records ran)
    [ -z "${GPU_SELECTION:-}" ] || GPU_SELECTION=$(realpath "$GPU_SELECTION")
    [ -z "${PREVIOUS_FROM:-}" ] || PREVIOUS_FROM=$(realpath "$PREVIOUS_FROM")
    (export PYTHONPATH="$WORK/site" PYTHONUNBUFFERED=1 WORK REC KIT BENCH="${BENCH:-}" NO_EB="${NO_EB:-}" \
         PLAIN_FROM="${PLAIN_FROM:-}" TARGET="${TARGET:-780}" PROBE_SUITES="${PROBE_SUITES:-}" \
         PROBES_FROM="${PROBES_FROM:-}" FALLBACK="${FALLBACK:-}" GPU_SELECTION="${GPU_SELECTION:-}" \
         PREVIOUS_FROM="${PREVIOUS_FROM:-}" RUNS="${RUNS:-}" SEED_FROM_PLAIN="${SEED_FROM_PLAIN:-}" RERUN="${RERUN:-}"
     setsid bash -c '
         [ -n "$NO_EB" ] || python3 tools/validate-gpu/eb_gpu_run.py --workdir "$WORK/eb" --out "$REC" --harness-tree "$KIT/harness" \
             --lmod-debs "$KIT/debs" --carried "$WORK/site" "$@" > "$REC/run.log" 2>&1
         [ -n "$BENCH" ] || exit 0
         python3 "$WORK/scripts/bench_python.py" "$WORK/bench-python" "$WORK/site" > "$REC/bench.log" 2>&1 || exit 1
         selection=()
         [ -z "$GPU_SELECTION" ] || { cp "$GPU_SELECTION" "$REC/gpu-selection.json"; selection=(--gpu-selection "$REC/gpu-selection.json"); }
         [ -n "$GPU_SELECTION" ] || case " $BENCH " in *" gpu "*|*" probe "*)
             python3 "$WORK/scripts/probe_cuda.py" --harness "$WORK/bench-tree" --python "$WORK/bench-python/bin/python" \
                 --workdir "$WORK/probe" --out "$REC/gpu-selection.json" --target "$TARGET" \
                 ${PROBE_SUITES:+--suites $PROBE_SUITES} ${PROBES_FROM:+--probes-from $PROBES_FROM} \
                 >> "$REC/bench.log" 2>&1 || exit 1
             selection=(--gpu-selection "$REC/gpu-selection.json");;
         esac
         case " $BENCH " in *" gpu "*)
             if [ -n "$FALLBACK" ] && ! python3 -c "import json, sys; sys.exit(not json.load(open(sys.argv[1]))[\"target_reached\"])" \
                     "$REC/gpu-selection.json"; then
                 echo "h200_round: the probe reached no ${TARGET} s selection: the $FALLBACK case instead" >> "$REC/bench.log"
                 BENCH=$(echo " $BENCH " | sed "s/ gpu / $FALLBACK /g")
             elif [ -n "$FALLBACK" ]; then
                 PLAIN_FROM=""  # the plain run of the fallback case: the gpu case measures its own
             fi;;  # without FALLBACK, PLAIN_FROM is the plain run of the gpu case in an earlier session
         esac
         BENCH=$(echo " $BENCH " | sed "s/ probe / /g")  # the probe alone is no case of the benchmark
         [ -n "${BENCH// }" ] || exit 0
         python3 "$WORK/scripts/bench_gpu_node.py" --harness "$WORK/bench-tree" --python "$WORK/bench-python/bin/python" \
             --workdir "$WORK/bench" --out "$REC/bench" --case $BENCH "${selection[@]}" \
             ${PLAIN_FROM:+--plain-from "$PLAIN_FROM"} ${PREVIOUS_FROM:+--previous-from "$PREVIOUS_FROM"} \
             ${RUNS:+--runs $RUNS} ${SEED_FROM_PLAIN:+--seed-from-plain} ${RERUN:+--rerun $RERUN} \
             >> "$REC/bench.log" 2>&1' round "$@" \
         < /dev/null > /dev/null 2>&1 &  # its own files only: a caller's pipe is not held open (`| tail` returns)
     echo $! > "$WORK/pid")
fi
pid=$(cat "$WORK/pid")
start=$(date +%s)
while kill -0 "$pid" 2>/dev/null && [ $(( $(date +%s) - start )) -lt "$WAIT" ]; do sleep 5; done
state=finished
kill -0 "$pid" 2>/dev/null && state=running
what="eb_gpu_run.py${BENCH:+ and the benchmark}"
[ -z "${NO_EB:-}" ] || what="the benchmark alone"
echo "h200_round: $what: $state"
tail -c 3000 "$REC/run.log" 2>/dev/null; tail -n 20 "$REC/bench.log" 2>/dev/null
if [ -n "${OUT:-}" ]; then
    tar -czf "$OUT/record.tar.gz" -C "$REC" . 2>/dev/null
    cp "$REC/results.json" "$REC/summary.md" "$REC/bench/bench-gpu-node.json" "$REC/bench.log" \
        "$REC/gpu-selection.json" "$OUT/" 2>/dev/null
    # the benchmark's own runs so far: ours' reports and output, the plain run's log (gzip: ~1 MB of text)
    (cd "$WORK/bench" 2>/dev/null && find . -maxdepth 2 \( -name 'pytorch-test-*' -o -name 'bench-stdout.txt' \
        -o -name '*-plain.log' -o -name '*results.json' \) -print0 | tar -czf "$OUT/bench-runs.tar.gz" --null -T - 2>/dev/null)
    # while a phase runs: its suites' own pytest logs so far (2026-12-02 they showed, after the device time was
    # spent, that two 64-bit-indexing tests took 1000 of the conv suite's 1078 s)
    if [ "$state" = running ]; then
        (cd "$WORK/eb/stack" 2>/dev/null && find . -path '*test-reports*' -name '*.log' -print0 \
            | tar -czf "$OUT/progress.tar.gz" --null -T - 2>/dev/null)
        # and the benchmark's runs of ours so far: their suite logs (the GPU share lines, a test out of memory), kept
        # where the device time ends before the run does (2026-12-06: the cap's first round left nothing of ours)
        (cd "$WORK" 2>/dev/null && find bench -path '*/output/*.log' -print0 \
            | tar -czf "$OUT/bench-progress.tar.gz" --null -T - 2>/dev/null)
    fi
    # the pytest sessions' own logs of the benchmark (test-reports: what a failed test printed, the GPU share lines):
    # the output logs above hold only what run_test.py prints (2026-12-07: 22 failures whose messages stayed there)
    (cd "$WORK" 2>/dev/null && find bench bench-tree -path '*test-reports*' -name '*.log' -print0 2>/dev/null \
        | tar -czf "$OUT/bench-suite-logs.tar.gz" --null -T - 2>/dev/null)
fi
[ "$state" = finished ]
