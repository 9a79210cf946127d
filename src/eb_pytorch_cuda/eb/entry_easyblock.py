"""Our EB_PyTorch as an EasyBuild 5 entry point (group easybuild.easyblock): `eb --use-entrypoints ...`.

EasyBuild 5 looks an easyconfig's `easyblock = 'EB_PyTorch'` up among entry-point easyblocks first
(easyconfig.get_easyblock_class), so with --use-entrypoints our main easyconfig gets our easyblock with no
--include-easyblocks.  An easyconfig that names no easyblock still gets upstream's module
(easybuild.easyblocks.pytorch): entry points are looked up only by an explicit name.

The easyblock is a file (easybuild/easyblocks/p/pytorch.py, or its installed copy under share/): it is
loaded once under this package's name MODULE, never as easybuild.easyblocks.pytorch, so upstream's module
stays importable under its own name for everything else in the run.
"""

import importlib.util
import sys
from typing import Any

from eb_pytorch_cuda.eb.config import plugin_files

try:
    from easybuild.tools.entrypoints import EntrypointEasyblock
except ImportError as err:  # EasyBuild 4.x
    raise ImportError('eb-pytorch-cuda entry points need EasyBuild 5 (easybuild.tools.entrypoints); with '
                      'EasyBuild 4 use --include-easyblocks (eb-pytorch-cuda config)') from err

MODULE = 'eb_pytorch_cuda.eb.easyblock_pytorch'


def load_easyblock_module() -> Any:
    """Our easyblock file as module MODULE (loaded once)."""
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    path = plugin_files()['easyblock']
    spec = importlib.util.spec_from_file_location(MODULE, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module  # EntrypointEasyblock imports the class's __module__; reprod copies its file
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MODULE]
        raise
    return module


EB_PyTorch = EntrypointEasyblock()(load_easyblock_module().EB_PyTorch)
