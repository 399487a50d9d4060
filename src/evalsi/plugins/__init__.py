"""Evaluator plugins: evaluators in another process, each plugin in its own virtual
environment (so its pins never fight evalsi's) or served at a URL, speaking
``proto/evalsi/plugin/v1alpha1/plugin.proto`` over gRPC.

The plugin side is ``serve_plugin`` (or ``python -m evalsi.plugins NAME`` for a package that
names its evaluators under the ``evalsi.plugins`` entry-point group); the host side installs
plugins (``install_plugin``), lists their evaluators in a registry (``add_plugins``) and
grades through ``PluginHost``. An evaluator with a ``judge`` param gets that judge of the run
served for its batch (``JudgeProxy``) and reads where with ``judge_endpoint()``. Needs
``grpcio`` (``evalsi[plugin]``).
"""

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.plugins._evaluators import PluginEvaluator, add_plugins, plugin_evaluators
    from evalsi.plugins._host import BATCH_TIMEOUT_S, MAX_RESTARTS, PluginHost
    from evalsi.plugins._install import evalsi_requirement, install_plugin, remove_plugin
    from evalsi.plugins._installed import (
        DATA_DIR_ENV,
        InstalledPlugin,
        data_dir,
        load_installed,
        plugins_dir,
        registry_file,
    )
    from evalsi.plugins._judge_endpoint import JUDGE_PARAM, JudgeEndpoint, judge_endpoint
    from evalsi.plugins._judge_proxy import MAX_BODY, JudgeProxy
    from evalsi.plugins._protocol import ENTRY_POINT_GROUP, SOCKET_ENV
    from evalsi.plugins._serve import serve_plugin

__getattr__ = lazy_exports(__name__, __file__)

__all__ = [
    "BATCH_TIMEOUT_S",
    "DATA_DIR_ENV",
    "ENTRY_POINT_GROUP",
    "JUDGE_PARAM",
    "MAX_BODY",
    "MAX_RESTARTS",
    "SOCKET_ENV",
    "InstalledPlugin",
    "JudgeEndpoint",
    "JudgeProxy",
    "PluginEvaluator",
    "PluginHost",
    "add_plugins",
    "data_dir",
    "evalsi_requirement",
    "install_plugin",
    "judge_endpoint",
    "load_installed",
    "plugin_evaluators",
    "plugins_dir",
    "registry_file",
    "remove_plugin",
    "serve_plugin",
]
