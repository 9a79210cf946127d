"""The child side of ecpolicy.read_easyconfig: run one easyconfig with EasyBuild's own parser, report its values.

Why a process of its own: an easyconfig is Python, run as `eb` runs it, and Python has ways out that no
handler in the reading process sees.  `os._exit(0)` in an easyconfig ended `report --easyconfig` with
status 0 and nothing printed (a script reads PASS), `os._exit(1)` with a FAIL, and a `raise
KeyboardInterrupt` was taken for a Ctrl-C.  Here whatever the easyconfig does ends this child only; the
parent (ecpolicy) judges what came back, and anything but a whole result is bad input naming the file.

Protocol (this module and ecpolicy only): argv is the parent's sys.path as JSON, the easyconfig's path,
then the parameter names wanted.  The one result is a JSON object on the descriptor that was stdout
when this started, {"values": {name: repr(value)}} or {"error": problem}; what the easyconfig prints
goes to stderr (the parent discards it), so it can never be taken for the result.  The values travel
as repr() and are read back by ast.literal_eval: plain values (numbers, strings, lists, tuples, dicts,
sets) arrive as they were, dict keys and tuples included, and anything else is refused there.
"""

import json
import os
import signal
import sys
from typing import Dict, Sequence

CODE = 'import sys, json; sys.path[:] = json.loads(sys.argv[1]); ' \
       'from eb_pytorch_cuda.eb.ecread import main; main(sys.argv[2:])'


def parse(path: str, names: Sequence[str]) -> Dict[str, object]:
    """{'values': {name: repr}} for the names the easyconfig at path sets, or {'error': problem}."""
    try:
        from easybuild.framework.easyconfig.parser import EasyConfigParser
    except ImportError:
        return {'error': 'reading an easyconfig needs easybuild-framework'}
    try:
        values = EasyConfigParser(path).get_config_dict()
    except SystemExit as err:
        return {'error': f'is not a readable easyconfig (it called sys.exit({err.code!r:.40}))'}
    except KeyboardInterrupt:  # a real SIGINT kills this child (SIG_DFL below): this one the easyconfig raised
        return {'error': 'is not a readable easyconfig (it raised KeyboardInterrupt)'}
    except BaseException as err:  # noqa: BLE001 - EasyBuildError, syntax errors and any other raise alike
        problem = ' '.join(str(err).split())[:300] or type(err).__name__
        return {'error': f'is not a readable easyconfig ({problem})'}
    return {'values': {name: repr(values[name]) for name in names if name in values}}


def main(argv: Sequence[str]) -> None:
    """Read argv[0] (an easyconfig) for the names argv[1:], write the result, and end without running
    anything the easyconfig may have left behind (atexit handlers, threads)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a real Ctrl-C ends the child by its signal, never as a result
    result = os.dup(1)
    os.dup2(2, 1)  # the easyconfig's print() never reaches the result
    try:
        answer = parse(argv[0], argv[1:])
        text = json.dumps(answer)
    except BaseException as err:  # noqa: BLE001 - repr() of a value raised: still one answer
        text = json.dumps({'error': f'is not a readable easyconfig ({type(err).__name__} while reading its values)'})
    sys.stdout.flush()
    data = text.encode('utf-8')
    while data:  # (a pipe: the parent reads until it is closed)
        data = data[os.write(result, data):]
    os._exit(0)
