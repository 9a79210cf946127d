"""The lines PyTorch's test/run_test.py prints about its suites, in one table.

Both readers of run_test.py's console output build their patterns from these: logparse (a whole log,
counts per suite) and batchlog (one batch's output cut into each suite's part).  Each fragment matches
the line from its start and is anchored (`^`, re.M) by the reader, which adds what it needs after it.
`X` below is a suite with an optional shard, `suite i/n`; see logparse's docstring for which harness
version prints which line.
"""

SUITE = r'(?P<name>[\w./-]+)(?: (?P<shard>\d+)/(?P<shards>\d+))?'
SUITE_UNNAMED = r'[\w./-]+(?: \d+/\d+)?'  # the same, without groups, to be used inside other patterns

# `Running X ... [date]`: a run of a suite starts
RUNNING = rf'Running {SUITE} \.\.\. \['
# `[##[group]]PRINTING [BEGINNING OF ]LOG FILE of X (path)`: a suite's replayed log starts
LOG_START = rf'(?:##\[group\])?PRINTING (?P<beginning>BEGINNING OF )?LOG FILE of {SUITE} \('
# `FINISHED PRINTING LOG FILE of X[ (path)]`: a suite's replayed log ends
LOG_END = rf'FINISHED PRINTING LOG FILE of {SUITE}'
# `X failed![ Received signal: SIGx]`: a run of a suite failed (also inside `RuntimeError: ` when run_test.py
# stops there, which is the same failure again)
FAILED = rf'{SUITE} failed!(?: Received signal: (?P<signal>\w+))?'
FAILED_RAISED_PREFIX = r'RuntimeError: '
# `X was successful, full logs can be found in artifacts with path P` (2.6 with --pipe-logs)
SUCCESS = rf'{SUITE} was successful, full logs can be found'
SUCCESS_LOG_PATH = r' in artifacts with path (?P<path>\S+)'
# lines only the harness prints, whatever the suite (batchlog finds where a replayed short log begins)
# (not `Running N items in this shard`: pytest-shard prints it inside every 2.1 suite's own log)
HARNESS_ONLY = (rf'Running {SUITE_UNNAMED} \.\.\. \[|Executing |FINISHED PRINTING LOG FILE of |Expand the folded group|'
                rf'{SUITE_UNNAMED} failed!|{SUITE_UNNAMED} was successful')
