"""The test step of a PyTorch build, EasyBuild-free: run PyTorch's own suites, judge them, report.

Judging a ten-hour test run must be exact and explainable: every suite, every failed test, every
crash is kept in the model, and the policy names why each failure is tolerated or not.  The package
is four layers and a service; each imports only the layers below it (setup.cfg's import contracts,
checked in CI):

    service          the test step assembled once (run_step, describe_step), which the easyblock and
                     `eb-pytorch-cuda test-suite` call with their StepInputs and StepHost: the executor
                     (executor_of: the one place that decides here or Slurm), where the policy applies, run
                     and judge, the kept result, the reports, the cleanup; the only module of the step the
                     easyblock imports (tests/test_easyblock_imports.py); beside it, sourcetree:
                     `test-suite`'s inputs from a source tree and a Python, and the terminal as host
    spread/          one build's suites over N batch jobs: workqueue (the shared-directory queue, its
                     typed spec.json), jobpool (the JobPool protocol a batch system implements, the
                     JobVariables a job's worker reads), slurm (Slurm's JobPool: sbatch, squeue, scancel,
                     node-local refusal), worker (what each job runs: the plan rebuilt from the spec),
                     controller (SlurmExecutor, run_spread, SpreadOptions: the submitting side)
    run/             running suites: plan (RunPlan, built once by build_plan: the environment, harness,
                     suites and pieces, call options, timeouts, GPU slots), executor (the protocol, execute),
                     here (HereExecutor, run_here: batches on this node), command (the runtest line, no
                     shell), shellwords (its words as shlex splits them, in linear time),
                     harness (run_test.py's serial lists and switches), discovery + selection_probe
                     (the selection asked of the harness itself), calls (every call's options and
                     environment), launcher (how a call starts: real processes, or a test's), batches (one
                     run_test.py call of many suites), solo (a suite alone), store (the results of one build,
                     resumable), gpus (GPUs to spread over, their compute capabilities), devicetests (CUDA
                     device tests or upstream's SANDCASTLE=1), node (how many batches this node holds),
                     piece_times (the times file that splits a long suite into our pieces), reruns (one failed
                     test alone, once a run), heartbeat (the line naming what runs since when, and the ETA),
                     retries (PyTorch's own retries off: the environment and the pytest plugin of
                     eb_pytorch_cuda/harness_plugin), gpu_share (the calls on one GPU share its memory: each
                     suite process capped by a plugin there), plugins (our plugins in the suites' pytest)
    policy/          judging (known failures per scope, the budget, the verdict), settings (the test
                     parameters, one list), suggest (policy entries from failed runs), report (JSON, text,
                     Markdown), timechart (the slowest suites, the per-suite time chart)
    results/         model, grammar (every pattern that reads run_test.py's and its suites' output),
                     logparse (console logs, streamed), xmlparse (JUnit XML), reportdirs (the
                     test-reports layout; each attempt's own report directory), splitting (a batch's
                     output per suite), outcome (one suite's result from its log and XML), pieces and
                     testtimes (a long suite cut into shards), saved (results JSON: load, validate, merge),
                     records (the typed store record), cudatests (the tests that ran on a CUDA device,
                     from the XML), seconds (the one reader of a time, and how one is shown), previous (the
                     times in the previous results JSON), scopes (Scope: a scope's kind, parsed once;
                     ScopeContext: where a build runs)

Every process the step starts goes through eb_pytorch_cuda.process (own group, dies with us).
"""
