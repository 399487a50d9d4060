"""A plugin's evaluators as ordinary evalsi evaluators: each is a batch evaluator whose batch
goes to the plugin, so the normal runners grade it (skips for missing fields, errors as data,
one ``Evaluate`` batch per runner batch) and a run's spec records it like any other."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalsi.core import EvaluatorManifest, Record, Scope
from evalsi.evaluators import BoundEvaluator, Evaluator, Registry, params_from_schema
from evalsi.plugins._installed import InstalledPlugin, load_installed
from evalsi.plugins._judge_endpoint import JUDGE_PARAM, JudgeEndpoint

if TYPE_CHECKING:
    from evalsi.plugins._host import PluginHost


class PluginEvaluator(Evaluator):
    """An evaluator served by a plugin. Its params are read back from the plugin's
    ``params_schema``, so they are checked and coerced exactly as in process (``--param
    acme/shouty.min_ratio=0.4`` is a number); binding it starts the plugin (a ``UserError`` if
    it cannot)."""

    def __init__(self, manifest: EvaluatorManifest, host: PluginHost) -> None:
        ref = manifest.ref
        asks_judge = _judge_default(manifest)

        async def grade(records: list[Record], **params: Any) -> list[Any]:
            name = params.get(JUDGE_PARAM, asks_judge)
            if asks_judge is None or not isinstance(name, str) or not name:
                return await host.evaluate(ref, params, records)
            from evalsi.plugins._judge_proxy import with_run_judge  # aiohttp's server

            async def batch(judge: JudgeEndpoint) -> list[Any]:
                return await host.evaluate(ref, params, records, judge=judge)

            return await with_run_judge(name, batch)

        grade.__doc__ = manifest.description
        params = params_from_schema(manifest.params_schema)
        super().__init__(grade, dataclasses.replace(manifest, batchable=True), params)
        self.host = host
        self.source = {"plugin": host.name, "plugin_version": host.plugin.version}

    def bind(self, params: Mapping[str, Any] | None = None, *, alias: str = "") -> BoundEvaluator:
        bound = super().bind(params, alias=alias)  # checked and coerced as in process
        self.host.start()
        return bound


def _judge_default(manifest: EvaluatorManifest) -> str | None:
    """The judge an evaluator asks for when its ``judge`` param is not given (``""`` when that
    param has no default), or ``None`` when it has no ``judge`` param: it wants no judge."""
    prop = (manifest.params_schema.get("properties") or {}).get(JUDGE_PARAM)
    if not isinstance(prop, Mapping):
        return None
    default = prop.get("default")
    return default if isinstance(default, str) else ""


def plugin_evaluators(plugin: InstalledPlugin, host: PluginHost | None = None) -> list[Evaluator]:
    """The record-scope evaluators ``plugin`` serves, over ``host`` (one made when not given).
    Dataset-scope ones (``Reduce``) are not served through plugins yet."""
    if host is None:
        host = shared_host(plugin)
    return [PluginEvaluator(m, host) for m in plugin.manifests() if m.scope is Scope.RECORD]


_HOSTS: dict[tuple[str, ...], PluginHost] = {}
_HOSTS_LOCK = threading.Lock()


def shared_host(plugin: InstalledPlugin) -> PluginHost:
    """The one host of ``plugin`` in this process: every registry built here (each
    ``evalsi.evaluate`` call builds one) shares its process, so runs in turn reuse a started
    plugin instead of starting another each time; it stops when evalsi exits."""
    from evalsi.plugins._host import PluginHost  # grpc, imported when a plugin is used

    key = (plugin.name, plugin.version, plugin.python, plugin.entry_point, plugin.url)
    with _HOSTS_LOCK:
        host = _HOSTS.get(key)
        if host is None:
            host = _HOSTS[key] = PluginHost(plugin)
        return host


def add_plugins(registry: Registry, base: Path | None = None) -> Registry:
    """``registry`` with the evaluators of every installed plugin known by name; a plugin is
    started only when one of its evaluators is bound."""
    for plugin in load_installed(base):
        names = [m.name for m in plugin.manifests() if m.scope is Scope.RECORD]
        if names:
            registry.defer(names, _loader(plugin))
    return registry


def _loader(plugin: InstalledPlugin) -> Any:
    def load() -> Iterable[Evaluator]:
        return plugin_evaluators(plugin)

    return load
