"""Reading a user-supplied input file whole, with the one-line error the CLI shows for any failure."""

import os
from typing import Union

from eb_pytorch_cuda.errors import PluginError


def read_bytes(path: Union[str, 'os.PathLike[str]']) -> bytes:
    """The bytes of path, or PluginError naming the file and why it cannot be read."""
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except IsADirectoryError:
        raise PluginError(path, 'is a directory, not a file') from None
    except OSError as err:
        raise PluginError(path, f'cannot be read: {err.strerror}') from None
