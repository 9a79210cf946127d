"""Choose the GPU case of benchmarks/bench_gpu_node.py on the node that will run it (issue 49 item 3): a selection of
CUDA tests that takes about TARGET seconds as one plain run_test.py call, measured, not guessed.

Why: no record of this project holds the CUDA times of the suites that import with the GPU machine's torch (only
the convolution set's), and one device session (30 minutes) must hold the plain run (at least 10 minutes), ours,
and ours again after its own results.  So the node probes first: each candidate suite under the case's `-k`
expression, its tests reduced to a 1/SHARDS sample by node-id hash (eb_probe_plugin.py, the rule of PyTorch's
pytest_shard_custom), PARALLEL pytest processes at a time, each stopped after LIMIT seconds.  A suite's serial time
is estimated as its start-up plus SHARDS times the seconds of its sample's tests (of the tests that ended, scaled to
the whole sample where it was stopped); a suite with a failing test in its sample is left out (failed()).  Then the
rule (choose()): the narrowest exclusion tier (EXCLUDE_TIERS, `and not` terms of the `-k` expression) and the
shortest prefix of the candidates whose estimated plain time (the harness's serial suites one after another, then
its pool of 3 processes, longest first) reaches TARGET, no suite estimated over half of TARGET.  The estimate is
an estimate: the benchmark measures the plain run it chose (probed 12 at a time, test_transformers' estimate of
534 s was measured 350 s in a plain call).

    python probe_cuda.py --harness TREE --python PY --workdir DIR --out SELECTION.json [--expr 'cuda']
        [--suites ...] [--fixed SUITE=SECONDS ...] [--target 780] [--probes-from EARLIER.json ...]

--probes-from: an earlier SELECTION.json of the same node and kit; its probed suites that --suites does not name
are taken as probed there (their sample tests and start-up), before the new ones, so that one device session
probes only new candidates and still has the time to run the case it chose.

Writes SELECTION.json: {'suites': [...], 'expr': '-k expression', 'estimate': {...}, 'probes': {suite: {...}}}.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
# suites of the kit's tree with CUDA device tests that import with torch 2.11, off 2.6's serial list
# (nn/test_convolution aside: its CUDA set measured, 80.3 s without the two 64-bit-indexing tests,
# docs/benchmarks.md).  test_transformers alone took about 350 s of a 431 s plain call on the H200 (2026-12-04): the
# large ufunc, foreach, linalg and sparse sets let a selection reach 10 minutes with no suite over half of it;
# test_cuda is not a candidate (2.6's file on torch 2.11 is the likeliest to fail or hang; a plain call has no timeout)
# (the last ten: not yet probed on the H200, for suites of 100 to 300 s, which the pool of 3 needs to reach 10 minutes)
CANDIDATES = ('test_transformers test_binary_ufuncs test_unary_ufuncs test_foreach test_linalg test_sparse '
              'test_indexing test_view_ops test_shape_ops test_complex test_masked test_dlpack '
              'test_sparse_csr test_nestedtensor test_modules test_autograd test_ops_gradients test_prims '
              'test_expanded_weights test_optim test_decomp test_meta').split()
FIXED = {'nn/test_convolution': 80.3}  # measured on the H200 (the conv case): not probed again
# the 64-bit-indexing convolutions are out in every tier: test_depthwise_conv_64bit_indexing_cuda fails its tolerance
# on the H200 in 251 to 287 s a run, up to 9 runs in a plain call (docs/validation/gpu.md): 40 minutes
EXCLUDE_TIERS = (('64bit_indexing',),
                 ('64bit_indexing', 'flash_attention_vs_math_ref_grads'),
                 ('64bit_indexing', 'vs_math_ref_grads'),
                 ('64bit_indexing', 'vs_math_ref_grads', 'large'))
PLAIN_PROCS = 3  # 2.6's run_test.py pool without BUILD_ENVIRONMENT (tools/testing/test_selections.py: USE_3_PROCS)


def expression(base, excluded):
    """The `-k` expression of base with excluded terms ('cuda and not a and not b')."""
    return ' and '.join([f'({base})'] + [f'not {term}' for term in excluded])


def probe(suite, args):
    """Run one suite's sample; its JSON-lines notes path."""
    notes = os.path.join(args.workdir, suite.replace('/', '.') + '.jsonl')
    shards = args.shards_of.get(suite, args.shards)
    env = dict(os.environ, EB_PROBE_OUT=notes, EB_PROBE_SHARDS=str(shards), PYTHONUNBUFFERED='1',
               PYTHONPATH=os.pathsep.join([HERE] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    for name in ('SANDCASTLE', 'IS_CI', 'CI'):
        env.pop(name, None)
    argv = [args.python, '-m', 'pytest', f'{suite}.py', '-k', expression(args.expr, EXCLUDE_TIERS[0]),
            '-p', 'eb_probe_plugin', '-q', '-p', 'no:cacheprovider']
    start = time.time()
    with open(notes, 'w') as handle:
        handle.write(json.dumps({'start': start, 'shards': shards}) + '\n')
    with open(notes + '.log', 'wb') as log:
        process = subprocess.Popen(argv, cwd=os.path.join(args.harness, 'test'), env=env, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            process.wait(timeout=args.limit)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return notes


def summary(notes):
    """{start_up, selected, sample, done, seconds_done, stopped, tests: {id: [outcome, seconds]}} of a probe."""
    start = selected = sample = sampled_at = None
    shards, tests = 1, {}
    with open(notes) as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut by the kill
            if 'start' in record:
                start, shards = record['start'], record['shards']
            elif 'selected' in record:
                selected = record['selected']
            elif 'sample' in record:
                sample, sampled_at = record['sample'], record['at']
            elif 'id' in record:
                outcome, seconds = tests.get(record['id'], ['passed', 0.0])
                if record['outcome'] != 'passed':
                    outcome = record['outcome']
                tests[record['id']] = [outcome, round(seconds + record['seconds'], 4)]
    start_up = round(sampled_at - start, 1) if sampled_at and start else None
    return {'shards': shards, 'start_up': start_up, 'selected': selected, 'sample': sample, 'done': len(tests),
            'stopped': sample is None or len(tests) < sample, 'tests': tests}


def estimate(found, excluded):
    """Estimated serial seconds of a probed suite under excluded terms (None: it did not start)."""
    if found['start_up'] is None or not found['sample']:
        return None if found['start_up'] is None else found['start_up']
    kept = {test: value for test, value in found['tests'].items()
            if not any(term.lower() in test.lower() for term in excluded)}
    done_share = len(found['tests']) / found['sample']  # the share of the sample that ended before the limit
    seconds = sum(value[1] for value in kept.values()) / max(done_share, 1e-9)
    return round(found['start_up'] + found['shards'] * seconds, 1)


def failed(found):
    """Tests of a probe's sample that failed.  Such a suite is left out: 2.6's plain call runs each failing test
    up to 9 times in 3 sessions (docs/validation/gpu.md), ours at most 1 + rerun_failed_tests times (run/retries), so
    a failing suite would measure the retry bound, not the node's use (benchmarks/bench_harness_retries.py does)."""
    return sorted(test for test, (outcome, _) in found['tests'].items() if outcome == 'failed')


def plain_estimate(serial, pool):
    """2.6's order: its serial suites one after another, then its pool of PLAIN_PROCS, longest first."""
    procs = [0.0] * PLAIN_PROCS
    for seconds in sorted(pool, reverse=True):
        procs[procs.index(min(procs))] += seconds
    return round(sum(serial) + max(procs), 1)


def choose(probes, fixed, target):
    """(suites, tier index, estimate, reached): the narrowest tier's first prefix of the usable candidates, in their
    order, whose estimated plain time reaches target; where no tier's does, the longest option of the longest
    estimate (reached False: the caller says so).  Usable: started with a test selected, no failing test in its
    sample, and estimated at most half the target.  A longer suite bounds ours' first run (it has no previous times
    to cut the suite by) and may alone outlast the device session: on the H200
    (docs/validation/h200-2026-12-05-probe-cuda/) test_binary_ufuncs' estimate was 1882 s, and a rule that let it in
    started a plain run that could not end in the session."""
    best = None
    for tier, excluded in enumerate(EXCLUDE_TIERS):
        times = {suite: estimate(found, excluded) for suite, found in probes.items()}
        usable = [name for name in probes if probes[name]['selected'] and times[name] and not failed(probes[name])
                  and times[name] <= target / 2]
        chosen = []
        for suite in usable:
            chosen.append(suite)
            total = plain_estimate(list(fixed.values()), [times[name] for name in chosen])
            figures = {'plain': total, 'longest': max([times[name] for name in chosen] + list(fixed.values())),
                       'suites': {**fixed, **times}}
            if total >= target:
                return list(fixed) + list(chosen), tier, figures, True
            # a longer prefix of the same tier at the same estimate: more tests in the same plain time
            if best is None or total > best[2]['plain'] or (total == best[2]['plain'] and tier == best[1]):
                best = (list(fixed) + list(chosen), tier, figures, False)
    return best


def recorded_probes(paths, skip):
    """{suite: summary()} of earlier SELECTION.json files, their suites in skip left out; exits in one line naming
    a file that holds no probes."""
    probes = {}
    for path in paths:
        try:
            with open(path) as handle:
                record = json.load(handle)
            for suite, found in record['probes'].items():
                if suite not in skip:
                    probes[suite] = {**{key: value for key, value in found.items() if key != 'failed'},
                                     'tests': record['sample_tests'][suite]}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            sys.exit(f'probe_cuda: {path}: no probe record ({type(err).__name__}: {err})')
    return probes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--harness', required=True)
    parser.add_argument('--python', required=True)
    parser.add_argument('--workdir', required=True)
    parser.add_argument('--out', required=True)
    parser.add_argument('--expr', default='cuda')
    parser.add_argument('--suites', nargs='+', default=CANDIDATES)
    parser.add_argument('--fixed', nargs='*', default=[f'{k}={v}' for k, v in FIXED.items()], metavar='SUITE=SECONDS')
    parser.add_argument('--target', type=float, default=780.0)
    parser.add_argument('--shards', type=int, default=5)
    parser.add_argument('--limit', type=float, default=75.0)
    parser.add_argument('--parallel', type=int, default=12)  # one wave of probes on 16 cores
    parser.add_argument('--probes-from', nargs='*', default=[], metavar='JSON')
    args = parser.parse_args()
    args.harness, args.python = os.path.abspath(args.harness), os.path.abspath(args.python)
    args.shards_of = {'test_transformers': 40}  # about 10,000 CUDA tests; the others have hundreds to a few thousand
    os.makedirs(args.workdir, exist_ok=True)
    fixed = {name: float(seconds) for name, seconds in (item.split('=', 1) for item in args.fixed)}
    start = time.time()
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        paths = dict(zip(args.suites, pool.map(lambda suite: probe(suite, args), args.suites)))
    probes = {**recorded_probes(args.probes_from, set(args.suites)),
              **{suite: summary(path) for suite, path in paths.items()}}
    chosen = choose(probes, fixed, args.target)
    if chosen is None:
        sys.exit('probe_cuda: no candidate suite started: see ' + args.workdir)
    suites, tier, figures, reached = chosen
    selection = {'suites': suites, 'expr': expression(args.expr, EXCLUDE_TIERS[tier]), 'estimate': figures,
                 'target_reached': reached,
                 'target': args.target, 'probe_seconds': round(time.time() - start, 1),
                 'probes_from': [os.sep.join(os.path.abspath(path).split(os.sep)[-2:]) for path in args.probes_from],
                 'probed_here': list(args.suites),
                 'probes': {suite: {**{key: value for key, value in found.items() if key != 'tests'},
                                    'failed': failed(found)} for suite, found in probes.items()},
                 'sample_tests': {suite: found['tests'] for suite, found in probes.items()}}
    with open(args.out + '.part', 'w') as handle:
        json.dump(selection, handle, indent=1)
    os.replace(args.out + '.part', args.out)
    print(f"probe_cuda: {len(suites)} suites, -k {selection['expr']!r}, estimated plain {figures['plain']} s "
          f"(probed in {selection['probe_seconds']} s)"
          + ('' if reached else f": under the target {args.target} s (the usable candidates reach no more)"))
    for suite in suites:
        print(f"  {suite}: {figures['suites'][suite]} s")


if __name__ == '__main__':
    main()
