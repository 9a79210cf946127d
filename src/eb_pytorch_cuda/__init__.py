"""Make PyTorch with CUDA build, test and run correctly on RPATH-linked EasyBuild stacks.

All logic lives in this package; the EasyBuild-facing files (hooks file, easyblock) are thin
adapters over it.  Nothing here imports EasyBuild at import time, so the library can be used and
tested without a build.
"""

__version__ = '0.1.0'

# The project's home, the one address every message names for documentation (a pip install has no docs/
# directory); pyproject.toml's [project.urls] say the same (tests/test_packaging.py).
PROJECT_URL = 'https://github.com/eb-pytorch-cuda/eb-pytorch-cuda'


def docs_url(page: str, section: str = '') -> str:
    """The address of the documentation page docs/<page>.md (and its section's anchor), for messages."""
    return f"{PROJECT_URL}/blob/main/docs/{page}.md{'#' + section if section else ''}"
