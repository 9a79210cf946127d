"""Driver run by the real glibc loader: load libtorch_cuda.so, then make cuDNN open its sub-libraries in given orders.

Run as `python -I cudnn_order_driver.py LIBTORCH_CUDA LIBCUDNN_SONAME ORDERS_JSON` in a clean environment
(`env -i`, no LD_LIBRARY_PATH).  libtorch_cuda.so is loaded once, with RTLD_GLOBAL as Python's import
does; then, for each order, a forked child calls the given entry points of libcudnn.so.N one after
the other (each makes cuDNN dlopen() one sub-library) and exits.  Forking after the load keeps every
order's dlopen() calls independent of the others', as in a fresh process, at a fraction of the cost of
loading 1.2 GB of libraries 720 times.  A child that cuDNN aborts ("Could not load library ...") is a
failing order.  Prints one JSON list: [{"order": [...], "ok": bool, "status": int, "message": str,
"loaded": [sonames of the cuDNN sub-libraries mapped at the end], "statuses": [cudnnStatus_t of each call]}]
(cuDNN 8 aborts the process when a sub-library does not load; cuDNN 9 returns an error status instead).
Standard library only.
"""

import ctypes
import json
import os
import re
import sys
import tempfile


def mapped_cudnn():
    names = set()
    with open('/proc/self/maps') as maps:
        for line in maps:
            match = re.search(r'/(libcudnn[^/\s]*\.so[.\d]*)', line)
            if match:
                names.add(match.group(1))
    return sorted(names)


def run_order(library, order):
    with tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            os.dup2(err.fileno(), 2)
            os.dup2(err.fileno(), 1)
            statuses = [int(getattr(library, name)()) for name in order]
            sys.stdout.flush()
            report = f'\nstatuses {json.dumps(statuses)}\nmapped {json.dumps(mapped_cudnn())}\n'
            os.write(1, report.encode())
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        err.seek(0)
        text = err.read().decode('utf-8', 'replace')
    loaded = re.search(r'^mapped (.*)$', text, re.M)
    statuses = re.search(r'^statuses (.*)$', text, re.M)
    message = '\n'.join(line for line in text.splitlines() if not line.startswith(('statuses ', 'mapped ')))
    return {'order': order, 'ok': os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and loaded is not None,
            'status': status, 'message': message.strip(), 'loaded': json.loads(loaded.group(1)) if loaded else None,
            'statuses': json.loads(statuses.group(1)) if statuses else None}


def main(argv):
    torch_cuda, cudnn_soname, orders_file = argv
    ctypes.CDLL(torch_cuda, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    library = ctypes.CDLL(cudnn_soname)  # already loaded as a NEEDED entry of libtorch_cuda.so: found by soname
    with open(orders_file) as handle:
        orders = json.load(handle)
    json.dump([run_order(library, order) for order in orders], sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
