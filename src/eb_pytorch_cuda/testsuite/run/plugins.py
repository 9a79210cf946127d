"""Our pytest plugins in the suites' processes: the modules of eb_pytorch_cuda/harness_plugin, named in
PYTEST_PLUGINS with their directory at the end of PYTHONPATH, so every pytest session the harness starts loads
them (run/retries: no harness retries; run/gpu_share: a GPU's memory shared by all its suite processes).
"""

import os
from typing import Dict, Mapping

PLUGIN_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          'harness_plugin')


def with_plugin(env: Mapping[str, str], plugin: str) -> Dict[str, str]:
    """env with plugin (a module of PLUGIN_DIR) in PYTEST_PLUGINS and PLUGIN_DIR at the end of PYTHONPATH;
    adding it twice changes nothing (a Slurm job gets the submitter's environment)."""
    env = dict(env)
    plugins = [name.strip() for name in env.get('PYTEST_PLUGINS', '').split(',') if name.strip()]
    if plugin not in plugins:
        env['PYTEST_PLUGINS'] = ','.join(plugins + [plugin])
    paths = [path for path in env.get('PYTHONPATH', '').split(os.pathsep) if path]
    if PLUGIN_DIR not in paths:
        env['PYTHONPATH'] = os.pathsep.join(paths + [PLUGIN_DIR])
    return env
