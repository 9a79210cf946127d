"""The `eb-pytorch-cuda` command: the library's operations for people and scripts.

Exit codes: 0 success (report: pass), 1 a check found a problem (report: fail), 2 bad input or a
failed operation (one line on stderr naming the file and the problem; nothing modified), 128+N killed
by signal N (SIGINT 130, SIGTERM 143, SIGHUP 129: one line, temporary files removed).  They hold whatever the
standard streams are: standard output closed or unwritable is exit 2 naming it; a line standard error cannot
take (closed, full) is lost, the status stays.
"""

import argparse
import os
import shlex
import shutil
import signal
import sys
from typing import Dict, Optional, Sequence, Union

from eb_pytorch_cuda import __version__
from eb_pytorch_cuda.clihelp import about, main_epilog
from eb_pytorch_cuda.cudnn import CATALOG, DEFAULT_NEEDED, ENV_VARIABLE
from eb_pytorch_cuda.errors import PluginError, Terminated
from eb_pytorch_cuda.escape import printable
from eb_pytorch_cuda.testsuite.policy.settings import DEFAULT_HEARTBEAT, MAX_RERUNS, TIMEOUT_RULE

PROG = 'eb-pytorch-cuda'


def cmd_add_needed(args: argparse.Namespace) -> int:
    from eb_pytorch_cuda.patch.needed import add_needed  # imported where used: doctor starts faster without it
    result = add_needed(args.library, args.sonames, force=args.force, break_hardlinks=args.break_hardlinks,
                        allow_setid=args.allow_setid)
    for soname in result.added:
        resolution = result.resolutions[soname]
        where = resolution.path if resolution.found else 'UNRESOLVED (forced)'
        print(f'== patched {result.path}: added NEEDED {soname} (resolves to {where})')
    for soname in result.already_present:
        print(f'== {result.path}: NEEDED {soname} already present, nothing to do')
    return 0


def cmd_check_needed(args: argparse.Namespace) -> int:
    from eb_pytorch_cuda.patch.needed import check_needed, check_problems
    checks, report = check_needed(args.library, args.sonames, expect_dir=args.expect_dir, load=args.load,
                                  preload=args.preload or ())
    for check in checks:
        resolution = check.resolution
        where = f'{resolution.path} ({resolution.via})' if resolution.found else 'unresolved'
        mapped = '' if check.mapped is None else (', mapped by a real load' if check.mapped else ', NOT mapped')
        status = 'FAIL' if check.problem else 'ok'
        print(f'{status:4} {check.soname}: NEEDED {"yes" if check.present else "no"}, resolves to {where}{mapped}')
    if report is not None and not report.loaded:
        print(f'load error: {report.error}')
    problems = check_problems(args.library, checks)
    for problem in problems:
        print(f'{PROG}: {problem}', file=sys.stderr)
    return 1 if problems else 0


def cmd_cudnn_catalog(args: argparse.Namespace) -> int:
    from eb_pytorch_cuda.cudnn import runpath_note, verified_with
    for major in sorted(CATALOG):
        defaults = set(DEFAULT_NEEDED.get(major, ()))
        print(f'cuDNN {major}:')
        for soname in CATALOG[major]:
            print(f"  {soname}{'  (default NEEDED entry)' if soname in defaults else ''}")
        print(f'  verified with: {verified_with(major)}')
        print(f'  when it matters: {runpath_note(major)}')
    print(f'Choose others per easyconfig (cudnn_needed), per site (${ENV_VARIABLE}, comma-separated) '
          f'or in a site hooks file; entries missing from the cuDNN installation are always skipped.')
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from eb_pytorch_cuda.eb import ecpolicy
    from eb_pytorch_cuda.testsuite import service
    from eb_pytorch_cuda.testsuite.results.scopes import detect_context
    from eb_pytorch_cuda.testsuite.policy.report import to_json, to_markdown, to_text
    from eb_pytorch_cuda.testsuite.policy.settings import TERMS_KEY, JudgedTerms
    from eb_pytorch_cuda.eb.ebsummary import load
    from eb_pytorch_cuda.testsuite.results.saved import common_context, mark_missing, read_expected_suites
    if args.max_failed_tests is not None and args.max_failed_tests < 0:
        raise PluginError('--max-failed-tests', f'must be a non-negative integer, got {args.max_failed_tests}')
    expected = read_expected_suites(args.expected_suites) if args.expected_suites else []
    saved, carried = _carried_terms(args.paths, use=not args.easyconfig)
    values = ecpolicy.read_easyconfig(args.easyconfig) if args.easyconfig else {}
    capabilities = args.cuda_compute_capabilities.split(',') if args.cuda_compute_capabilities \
        else values.get('cuda_compute_capabilities') or ()
    # where the run ran: as the options say, else as its saved results recorded it, else this machine
    given = bool(args.target or args.cuda_compute_capabilities)
    here = detect_context(capabilities, target=args.target)
    context = (None if given else common_context(args.paths)) or here
    if args.easyconfig and not context.target_known:  # its target-scoped entries are left out: said
        print(f'note: {context.target_line()}', file=sys.stderr)
    ran = carried if not args.easyconfig else None  # judged again by the terms the results carry
    if ran is not None:
        policy, device = ran.policy(args.max_failed_tests), service.device_mode_of(ran.device_tests)
    else:
        policy = ecpolicy.policy_from_values(values, context, args.easyconfig or 'policy', args.max_failed_tests)
        device = None
    note = _terms_note(args, saved, carried, policy)
    result = load(args.paths)
    mark_missing(result, expected)
    verdict, _warnings = service.judged(result, policy, device)  # the warnings are the JSON's own
    suggestion = _suggest_policy(args, values, here, not given, policy if ran is not None else None)
    if args.format == 'json':
        import dataclasses
        import json
        data = to_json(result, verdict, context)
        budget = policy.max_failed_tests
        judged_by = JudgedTerms.of(policy) if ran is None else dataclasses.replace(ran, max_failed_tests=budget)
        data[TERMS_KEY] = judged_by.to_dict()
        if note:
            data['terms_note'] = note
        if suggestion:
            data['suggested_policy'] = suggestion[1]
        print(json.dumps(data, indent=1, allow_nan=False))
    elif args.format == 'markdown':
        print(to_markdown(result, verdict, context=context, suggestion=suggestion and suggestion[0], note=note))
    else:
        print((f'{printable(note)}\n' if note else '') + to_text(result, verdict)
              + (f'\n\n{suggestion[0]}' if suggestion else ''))
    if suggestion and len(suggestion[2]) > 1:  # several runs, each judged for its own target: all must pass
        return 0 if all(run.passes_now for run in suggestion[2]) else 1
    return 0 if verdict.passed else 1


def _carried_terms(paths, use=True):
    """(the saved JSON results among paths, the terms they carry or None): each one's terms are checked (bad
    ones: PluginError naming the file and the key); where use (no --easyconfig replaces them) all that carry
    terms must carry the same, else PluginError naming the one that differs."""
    from eb_pytorch_cuda.testsuite.policy.settings import terms_of
    from eb_pytorch_cuda.testsuite.results.saved import read_saved
    saved, carried, first = [], None, None
    for path in paths:
        if os.path.isdir(path) or not str(path).endswith('.json'):
            continue
        saved.append(path)
        terms = terms_of(path, read_saved(path))
        if terms is None:
            continue
        if carried is None:
            carried, first = terms, path
        elif use and terms != carried:
            raise PluginError(path, f'was judged by other terms ({terms.describe()}) than {first} '
                                    f'({carried.describe()}): give --easyconfig to judge them by one policy')
    return saved, carried


def _terms_note(args, saved, carried, policy) -> Optional[str]:
    """report's one line on the terms it judges by, where a saved JSON result is among its inputs: the ones the
    result carries (as the build judged it), those with the budget of --max-failed-tests, or the easyconfig's
    in their place; None where no saved result was given (logs and XML carry no terms: as before)."""
    from eb_pytorch_cuda.testsuite.policy.settings import describe_policy
    if not saved:
        return None
    budget = ' and --max-failed-tests' if args.max_failed_tests is not None else ''
    if carried is None:
        which = f'{saved[0]} carries' if len(saved) == 1 else 'the saved results carry'
        source = (f'from {args.easyconfig}{budget}' if args.easyconfig else
                  'budget from --max-failed-tests' if budget else 'the defaults')
        return (f'terms: {which} none (written before results carried their terms); {source} '
                f'({describe_policy(policy)})')
    if args.easyconfig:
        return (f'terms: from {args.easyconfig}{budget} ({describe_policy(policy)}), not the ones the build judged '
                f'by ({carried.describe()})')
    if budget:
        return f'terms: as judged by the build, budget from --max-failed-tests ({describe_policy(policy)})'
    return f'terms: as judged by the build ({describe_policy(policy)})'


def _suggest_policy(args, values, given, recorded, carried=None):
    """report --suggest-policy: (easyconfig text, JSON data, runs) of the known_test_failures entries that would
    make each run pass, merged over runs (one per target); None without the option.  With several runs the
    exit status is theirs, each judged for its own target (the report above judges all inputs together).
    given: the context of the options (or this machine); recorded: a saved result that recorded where it ran is
    a run there (suggest.runs_from_paths).  carried: the policy the saved results carry (their entries' scopes
    already resolved), for every run."""
    if not (args.suggest_policy or args.suggest_scope is not None):
        return None
    from eb_pytorch_cuda.eb import ebsummary, ecpolicy
    from eb_pytorch_cuda.testsuite.policy import suggest
    from eb_pytorch_cuda.testsuite.results.scopes import Scope
    scope = None if args.suggest_scope is None else Scope.parse(args.suggest_scope, '--suggest-scope')
    runs = suggest.runs_from_paths(
        args.paths, lambda context: carried or ecpolicy.policy_from_values(values, context,
                                                                           args.easyconfig or 'policy',
                                                                           args.max_failed_tests),
        given, recorded, load=ebsummary.load)
    merged, outcome = suggest.suggest_runs(runs, scope)
    return suggest.render(runs, merged, outcome), suggest.to_data(runs, merged, outcome), runs


def cmd_test_suite(args: argparse.Namespace) -> int:
    """Run a PyTorch source tree's test suites against an installed torch, judge and report them."""
    from eb_pytorch_cuda.inputs import write_atomically
    from eb_pytorch_cuda.testsuite import service, sourcetree
    from eb_pytorch_cuda.testsuite.policy.report import RESULTS_JSON, RESULTS_MARKDOWN
    inputs = _test_suite_inputs(args)
    results = args.results or os.path.join(os.getcwd(), 'pytorch-test-suite')
    outcome = sourcetree.test_source_tree(args.source, results, inputs)
    texts = service.report_texts(outcome)
    for name, text in texts.items():
        write_atomically(os.path.join(results, name), text)
    if args.format == 'json':
        print(texts[RESULTS_JSON], end='')
    elif args.format == 'markdown':
        print(texts[RESULTS_MARKDOWN])
    else:
        print('\n'.join(service.verdict_lines(outcome)))
    return 0 if outcome.verdict.passed else 1


def _test_suite_inputs(args: argparse.Namespace):
    """test-suite's step inputs: the easyconfig's test settings with the options given in their place, the
    command (said before it runs), the terminal's environment; every option checked before anything runs."""
    import dataclasses
    from eb_pytorch_cuda.eb import ecpolicy
    from eb_pytorch_cuda.testsuite import service
    from eb_pytorch_cuda.testsuite.policy.report import RESULTS_JSON
    from eb_pytorch_cuda.testsuite.policy.settings import TestSettings, check_option
    for option, value, minimum, maximum in (('--timeout', args.timeout, 1, None),
                                            ('--parallel', args.parallel, 1, None),
                                            ('--rerun', args.rerun, 0, MAX_RERUNS), ('--jobs', args.jobs, 1, None),
                                            ('--heartbeat', args.heartbeat, 1, None)):
        check_option(option, value, minimum, maximum)  # 0 or -1 is refused, not replaced by the easyconfig's
    settings = ecpolicy.read_settings(args.easyconfig) if args.easyconfig else TestSettings()
    modes: Dict[str, Union[bool, str]] = {'auto': 'auto', 'true': True, 'false': False}
    settings = dataclasses.replace(
        settings, parallel_test_suites=args.parallel or settings.parallel_test_suites,
        test_suite_timeout=args.timeout or settings.test_suite_timeout,
        rerun_failed_tests=settings.rerun_failed_tests if args.rerun is None else args.rerun,
        harness_retries=settings.harness_retries or args.harness_retries,
        test_suite_jobs=args.jobs or settings.test_suite_jobs,
        test_suite_heartbeat=args.heartbeat or settings.test_suite_heartbeat,
        cuda_device_tests=modes[args.cuda_device_tests] if args.cuda_device_tests else settings.cuda_device_tests)
    results = args.results or os.path.join(os.getcwd(), 'pytorch-test-suite')
    return service.StepInputs(
        settings, command=lambda excluded: _test_suite_command(args, excluded), env=dict(os.environ),
        output_dir=os.path.join(results, 'output'), python=os.path.abspath(args.python),
        source=args.easyconfig or 'policy', default_budget=ecpolicy.upstream_default_max_failed_tests(),
        target=args.target, previous_results=os.path.join(results, RESULTS_JSON))


def _test_suite_command(args: argparse.Namespace, excluded):
    """test-suite's command, said before it runs: --runtest, else the easyconfig's runtest with its pretestopts
    and testopts (as the test step runs it), else the default."""
    from eb_pytorch_cuda.eb import ecpolicy
    from eb_pytorch_cuda.testsuite import sourcetree
    runtest, pretestopts, testopts, origin = args.runtest, '', '', '--runtest'
    if runtest is None and args.easyconfig:
        written, ec_pretestopts, ec_testopts = ecpolicy.read_test_command(args.easyconfig)
        if written is not None:
            runtest, pretestopts, testopts = written, ec_pretestopts, ec_testopts
            origin = f"{args.easyconfig}'s runtest" + (', pretestopts' if pretestopts.strip() else '') + \
                (', testopts' if testopts.strip() else '')
    if runtest is None:
        origin = 'the default runtest' + (f' ({args.easyconfig} sets none)' if args.easyconfig else '')
    command = sourcetree.source_tree_command(args.source, args.python, runtest, excluded, pretestopts, testopts,
                                             args.easyconfig or '--runtest')
    assignments = ' '.join(f'{name}={shlex.quote(value)}' for name, value in sorted(command.env.items()))
    sourcetree.TerminalHost(args.python).say(f"test command ({origin}, no shell): "
                                             f"{assignments + ' ' if assignments else ''}{shlex.join(command.argv)}  "
                                             f"[in {command.cwd}]")
    return command


def cmd_config(args: argparse.Namespace) -> int:
    """Our configuration added to the site's (read from EasyBuild: files, $EASYBUILD_*): a site hooks file is
    kept, never replaced; where only the site's file can run ours, exit 2 with the lines that make it do so."""
    from eb_pytorch_cuda.eb import config
    from eb_pytorch_cuda.eb.siteconfig import read_settings
    if args.entrypoints:
        config.check_entry_points()  # EasyBuild 4, or an install without them: said before anything is read
    settings = read_settings()
    try:
        the_plan = config.plan(settings, config.easybuild_version(), args.entrypoints)
    except config.SiteHooksKept as err:
        print(f'{PROG}: error: {printable(err)}', file=sys.stderr)
        sys.stderr.write(err.forwarding)
        return 2
    if args.env:
        text = config.environment_text(the_plan, args.entrypoints)
    else:
        text = config.config_file_text(the_plan, args.entrypoints)
        for warning in config.environment_overrides(settings, the_plan):
            print(f'{PROG}: warning: {printable(warning)}', file=sys.stderr)
    sys.stdout.write(text)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from eb_pytorch_cuda.eb.demo import run_demo
    return run_demo(args.workdir, args.entrypoints, args.site_hooks)


def cmd_doctor(args: argparse.Namespace) -> int:
    from eb_pytorch_cuda.loader.doctor import blocking, diagnose, to_json, to_text
    from eb_pytorch_cuda.loader.execstack import target_glibc
    executable = None if args.executable in (None, 'none') else os.path.realpath(args.executable)
    glibc = target_glibc(args.glibc, executable)  # a bad --glibc is refused before anything is read
    resolver = None
    if args.ld_so_cache is not None:
        from eb_pytorch_cuda.loader.ldcache import read_ld_so_cache_file
        from eb_pytorch_cuda.loader.resolve import Resolver
        resolver = Resolver(ld_so_cache={} if args.ld_so_cache == 'none' else read_ld_so_cache_file(args.ld_so_cache))
    hints = [d for d in os.environ.get('LD_LIBRARY_PATH', '').split(':') if d]  # never searched: see doctor
    findings, count = diagnose(args.paths, start=args.start, executable=executable, glibc=glibc, hint_dirs=hints,
                               resolver=resolver)
    print(to_json(findings, count, glibc) if args.format == 'json' else to_text(findings, count, glibc))
    return 1 if blocking(findings) else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0], epilog=main_epilog(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--version', action='version', version=f'{PROG} {__version__}',
                        help='print the version and exit')
    sub = parser.add_subparsers(dest='command', required=True, metavar='COMMAND',
                                help='one of these (each has its own --help, with examples)')

    add = sub.add_parser('add-needed', help='add NEEDED entries to a library (idempotent, atomic)',
                         **about('add-needed'))
    add.add_argument('library', metavar='LIBRARY', help='the shared library to patch (e.g. libtorch_cuda.so)')
    add.add_argument('sonames', nargs='+', metavar='SONAME',
                     help='a library to add as a NEEDED entry (e.g. libcudnn_cnn_train.so.8)')
    add.add_argument('--force', action='store_true', help='add entries even if they do not resolve')
    add.add_argument('--break-hardlinks', action='store_true',
                     help='patch a library that has other hard links (they keep the old content)')
    add.add_argument('--allow-setid', action='store_true',
                     help='patch a setuid/setgid library (refused otherwise; the bits are kept)')
    add.set_defaults(func=cmd_add_needed)

    check = sub.add_parser('check-needed', help='prove NEEDED entries are present, resolve and load',
                           **about('check-needed'))
    check.add_argument('library', metavar='LIBRARY', help='the shared library whose entries to prove')
    check.add_argument('sonames', nargs='+', metavar='SONAME', help='a NEEDED entry the library must have')
    check.add_argument('--expect-dir', metavar='DIR', help='each soname must resolve to a file inside DIR')
    check.add_argument('--load', action='store_true',
                       help='load the library in a clean process and require each soname to be mapped')
    check.add_argument('--preload', action='append', metavar='LIB',
                       help='load LIB first (e.g. the CUDA driver stub on a node without a GPU driver)')
    check.set_defaults(func=cmd_check_needed)

    report = sub.add_parser('report', help='judge PyTorch test results (logs, XML report dirs, saved JSON, '
                                           "EasyBuild's failure summary)", **about('report'))
    report.add_argument('paths', nargs='+', metavar='PATH',
                        help="a run_test.py log, a test-reports directory, a saved pytorch-test-results.json or "
                             "EasyBuild's failure summary; several are one run (or, with --suggest-policy, one "
                             'run per saved JSON result)')
    report.add_argument('--format', choices=('text', 'json', 'markdown'), default='text',
                        help='text for a terminal (default), json for scripts, markdown for a pull-request comment')
    report.add_argument('--max-failed-tests', type=int, metavar='N',
                        help='budget for unknown failures (default: the one a saved JSON result was judged by)')
    report.add_argument('--easyconfig', metavar='EC', help='take the policy (budget, known failures) from EC '
                                                           '(a path, or a file name eb finds on its robot path; '
                                                           'default: the terms a saved JSON result was judged by)')
    report.add_argument('--target', metavar='TARGET',
                        help='CPU target for scoped entries (default: the one the saved JSON results recorded, '
                             'else $EESSI_SOFTWARE_SUBDIR, else detected by archspec; neither: entries scoped to a '
                             'target do not apply)')
    report.add_argument('--cuda-compute-capabilities', metavar='CC[,CC]',
                        help="e.g. 8.0,9.0 (default: the GPUs' the saved JSON results recorded, else EC's)")
    report.add_argument('--suggest-policy', action='store_true',
                        help='print the known_test_failures entries that would make it pass (placeholder reasons); '
                             'without --target or --cuda-compute-capabilities each saved JSON result is a run '
                             'of its own target, merged')
    report.add_argument('--suggest-scope', metavar='SCOPE',
                        help="put every suggested entry in SCOPE ('', a family, a target, a compute capability) "
                             'instead of the scope of the runs that saw it')
    report.add_argument('--expected-suites', metavar='FILE',
                        help='suites that must have an outcome, one a line (e.g. run_test.py --dry-run --verbose '
                             'output); any without one is "missing" and fails the verdict unless known')
    report.set_defaults(func=cmd_report)

    suite = sub.add_parser('test-suite', help="run a PyTorch source tree's test suites against an installed torch, "
                                              'judge and report them as the easyblock does', **about('test-suite'))
    suite.add_argument('source', metavar='SRC', help='PyTorch source tree (its test/run_test.py is run)')
    suite.add_argument('--python', required=True, metavar='PY',
                       help='a Python that imports the torch to test (a path, or a name looked up on PATH)')
    suite.add_argument('--runtest', metavar='CMD', help='test command as in an easyconfig (default: EC\'s runtest '
                                                        'with its pretestopts and testopts, else '
                                                        '"cd test && %%(python)s run_test.py --continue-through-error '
                                                        '%%(excluded_tests)s")')
    suite.add_argument('--easyconfig', metavar='EC', help='take the policy (budget, known failures, excluded tests, '
                                                          'reruns) from EC (a path, or a file name eb finds on its '
                                                          'robot path)')
    suite.add_argument('--target', metavar='TARGET',
                       help='CPU target for scoped entries (default: $EESSI_SOFTWARE_SUBDIR, else detected by '
                            'archspec; neither: entries scoped to a target do not apply)')
    suite.add_argument('--parallel', type=int, metavar='N', help='run N batches of suites at a time (default: '
                                                                 "parallel_test_suites of EC, else auto: as many as "
                                                                 "this node's CPUs and memory hold)")
    suite.add_argument('--timeout', type=int, metavar='S',
                       help=f"seconds a suite may run (default: test_suite_timeout of EC, else {TIMEOUT_RULE}; "
                            f"the previous results are DIR's)")
    suite.add_argument('--rerun', type=int, metavar='N', help='rerun each failed test up to N times in isolation '
                                                              f'(at most {MAX_RERUNS}; default: rerun_failed_tests '
                                                              'of EC, else 0)')
    suite.add_argument('--harness-retries', action='store_true', help="keep PyTorch's own retries of a failed test "
                       "(harness_retries = True; default: harness_retries of EC, else off: --rerun the only retry)")
    suite.add_argument('--jobs', type=int, metavar='N', help='spread the suites over N Slurm jobs (sbatch; DIR, SRC '
                                                             'and PY on a path all nodes see; default: '
                                                             'test_suite_jobs of EC, else 1: here)')
    suite.add_argument('--heartbeat', type=int, metavar='S',
                       help='print the running suites, their times and an ETA at least every S seconds (default: '
                            f'test_suite_heartbeat of EC, else {DEFAULT_HEARTBEAT}, 5 minutes)')
    suite.add_argument('--results', metavar='DIR', help='where results and reports go (default: ./pytorch-test-'
                                                        'suite); the same command again runs only what is missing')
    suite.add_argument('--cuda-device-tests', choices=('auto', 'true', 'false'), type=str.lower,  # True, FALSE: as EC
                       help="PyTorch's device-generic CUDA tests: auto (where a GPU is seen and the torch has CUDA), "
                            "true (required: no GPU, or 0 CUDA tests run, fails), false (upstream's SANDCASTLE=1); "
                            "default: cuda_device_tests of EC, else auto")
    suite.add_argument('--format', choices=('text', 'json', 'markdown'), default='text',
                       help='how the report is printed (both reports are written to DIR either way)')
    suite.set_defaults(func=cmd_test_suite)

    doctor = sub.add_parser('doctor', help='predict "cannot open shared object" and "undefined symbol" failures; '
                                           'exit 1 when a load fails or loads the wrong copy', **about('doctor'))
    doctor.add_argument('paths', nargs='+', metavar='PATH', help='installation prefix, directory or library')
    doctor.add_argument('--format', choices=('text', 'json'), default='text',
                        help='text for a terminal (default), json for scripts')
    doctor.add_argument('--from', dest='start', metavar='LIB',
                        help='load only LIB (as with dlopen()); default: the Python extension modules, else an '
                             "installation's libtorch_cuda.so (what PyTorch loads), else every object no other one "
                             'needs')
    doctor.add_argument('--executable', metavar='EXE',
                        help="the program that loads them (its RPATH and symbols count, e.g. python3); "
                             "default: none, and symbols nothing defines are taken to come from that program")
    doctor.add_argument('--ld-so-cache', metavar='FILE',
                        help="judge with this ld.so.cache instead of /etc/ld.so.cache (another machine's, e.g. a "
                             "compatibility layer's), or 'none' for a loader that reads none (ld.so --inhibit-cache)")
    doctor.add_argument('--glibc', metavar='VERSION',
                        help='judge executable stacks for this glibc (2.41 and later refuse to dlopen() an object '
                             "that asks for one); default: the --executable's loader, else this machine's glibc")
    doctor.set_defaults(func=cmd_doctor)

    config = sub.add_parser('config', help='print an EasyBuild configuration file using our easyblock, hooks '
                                           'and easyconfigs', **about('config'))
    config.add_argument('--env', action='store_true', help='print export EASYBUILD_... lines instead')
    config.add_argument('--entrypoints', action='store_true',
                        help='EasyBuild 5: take our hooks and easyblock from the installed package (eb '
                             '--use-entrypoints), beside any --hooks file; EasyBuild 4 has no entry points')
    config.set_defaults(func=cmd_config)

    demo = sub.add_parser('demo', help='build the cuDNN and PyTorch stand-ins with real eb, our easyblock and hooks',
                          **about('demo'))
    demo.add_argument('--workdir', metavar='DIR', help='where to build (default: a new temporary directory)')
    demo.add_argument('--entrypoints', action='store_true',
                      help='EasyBuild 5: our hooks and easyblock from the entry points, not as files')
    demo.add_argument('--site-hooks', metavar='FILE',
                      help="a site's hooks file (e.g. EESSI's eb_hooks.py) as eb --hooks; needs --entrypoints")
    demo.set_defaults(func=cmd_demo)

    catalog = sub.add_parser('cudnn-catalog', help='list the cuDNN sub-libraries a site may add as NEEDED',
                             **about('cudnn-catalog'))
    catalog.set_defaults(func=cmd_cudnn_catalog)
    return parser


class _NamedOutput:
    """sys.stdout while main() runs a command: a write or flush that fails (the reader of a pipe gone: `report X |
    head -0`; a full disk; `> /dev/full`; a closed descriptor, `>&-`, where Python leaves sys.stdout None) raises
    PluginError naming the stream, where before the one line said "Broken pipe" or "No space left on device"
    naming nothing (and a closed one gave an AttributeError traceback, exit 1).  What is still buffered would fail
    again when the interpreter flushes at exit ("Exception ignored ... BrokenPipeError", exit 120), so the
    descriptor is then pointed at /dev/null: the exit status stays ours (2)."""

    def __init__(self, stream, name):
        self._stream, self._name = stream, name

    def write(self, text):
        if self._stream is None:
            raise PluginError(self._name, 'cannot be written: it is closed')
        try:
            return self._stream.write(text)
        except OSError as err:
            raise self._failed(err) from None

    def flush(self):
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except OSError as err:
            raise self._failed(err) from None

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def _failed(self, err):
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError):  # no descriptor (a test's StringIO): nothing will be flushed at exit
            pass
        return PluginError(self._name, f'cannot be written: {err.strerror or err}')


class _ErrorOutput:
    """sys.stderr while main() runs a command: what cannot be written there (closed: `2>&-`; full: `2>/dev/full`; a
    pipe gone) is dropped, so that the exit status is still the documented one; before, the failed write of the
    error line itself raised, and the exit status was 1 for bad input.  After a failure the descriptor is pointed
    at /dev/null (see _NamedOutput: the interpreter's flush at exit would fail and make the status 120)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text) if self._stream is not None else len(text)
        except (OSError, ValueError):
            self._drop()
            return len(text)

    def flush(self):
        try:
            if self._stream is not None:
                self._stream.flush()
        except (OSError, ValueError):
            self._drop()

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def _drop(self):
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError):
            pass


def _standard_streams():
    """Put the standard streams in the state main() relies on, returning (sys.stdout, sys.stderr) to restore.
    A closed descriptor 0, 1 or 2 gets /dev/null (else the next file opened would take its number, and a child
    process would write its output into that file); sys.stdout and sys.stderr are wrapped (_NamedOutput,
    _ErrorOutput)."""
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != descriptor:
                os.dup2(null, descriptor)
                os.close(null)
    saved = sys.stdout, sys.stderr
    sys.stdout = _NamedOutput(sys.stdout, 'standard output')
    sys.stderr = _ErrorOutput(sys.stderr)
    return saved


def _raise_terminated(signum, frame):
    raise Terminated(signum)


def _names_as_eb_takes_them(args: argparse.Namespace) -> None:
    """--easyconfig NAME found on the robot path as eb finds it (eb/ecfind), --python NAME on PATH: before any
    command reads them, so every message names the file that was used."""
    if getattr(args, 'easyconfig', None):
        from eb_pytorch_cuda.eb.ecfind import locate_easyconfig
        args.easyconfig = locate_easyconfig(args.easyconfig)
    if getattr(args, 'python', None):
        args.python = shutil.which(args.python) or args.python  # not found: refused by name (sourcetree.check_inputs)


def main(argv: Optional[Sequence[str]] = None) -> int:
    streams = _standard_streams()  # the exit status is the documented one whatever they are
    # SIGTERM/SIGHUP become an exception, like SIGINT's KeyboardInterrupt, so every cleanup (the
    # add-needed temporary file above all) runs before the one-line message and exit 128+N; one that
    # arrives ignored (`nohup eb-pytorch-cuda test-suite ...`) stays ignored: the run outlives the logout
    previous = {signum: signal.signal(signum, _raise_terminated) for signum in (signal.SIGTERM, signal.SIGHUP)
                if signal.getsignal(signum) != signal.SIG_IGN}
    try:
        try:
            args = build_parser().parse_args(argv)
            _names_as_eb_takes_them(args)
            code = args.func(args)
            sys.stdout.flush()  # a write error at exit would name nothing: seen here, it names the stream
            return code
        except PluginError as err:
            print(f'{PROG}: error: {printable(err)}', file=sys.stderr)  # a name with a newline: still one line
            return 2
        except OSError as err:  # anything the operations did not turn into a PluginError: still one line, exit 2
            where = f'{err.filename}: ' if err.filename else ''
            print(f'{PROG}: error: {printable(where)}{printable(err.strerror or err)}', file=sys.stderr)
            return 2
    except KeyboardInterrupt:  # (also when it arrives while an error above is being printed)
        print(f'{PROG}: interrupted (SIGINT); every process it started stopped, temporary files removed, '
              f'no file left half-written', file=sys.stderr)
        return 128 + signal.SIGINT
    except Terminated as err:
        name = signal.Signals(err.signum).name
        print(f'{PROG}: terminated ({name}); every process it started stopped, temporary files removed, '
              f'no file left half-written', file=sys.stderr)
        return 128 + err.signum
    finally:
        sys.stderr.flush()
        sys.stdout, sys.stderr = streams
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == '__main__':
    sys.exit(main())
