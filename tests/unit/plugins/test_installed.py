"""The plugin registry file: what install writes is what list and the catalog read back, and a
file this evalsi cannot read is a UserError naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalsi.core import UserError
from evalsi.evaluators import evaluator
from evalsi.plugins import InstalledPlugin, add_plugins, load_installed, registry_file
from evalsi.plugins._installed import save_installed


@evaluator(name="acme/shouty", version="1.0.0", output="passed")
def shouty(record: object, *, min_ratio: float = 0.5) -> bool:
    """Passes when the output shouts."""
    return True


def _plugin() -> InstalledPlugin:
    return InstalledPlugin(
        name="acme",
        version="1.2.0",
        source="./acme-plugin",
        python="/x/venv/bin/python",
        entry_point="acme",
        venv="/x/venv",
        evaluators=(InstalledPlugin.manifest_doc(shouty.manifest),),
    )


def test_a_plugin_round_trips_with_its_manifests(tmp_path: Path) -> None:
    save_installed([_plugin()], tmp_path)
    assert registry_file(tmp_path) == tmp_path / "plugins" / "plugins.json"
    (back,) = load_installed(tmp_path)
    assert back == _plugin()
    assert back.manifests() == [shouty.manifest]


def test_the_registry_knows_a_plugins_evaluators_without_starting_it(tmp_path: Path) -> None:
    save_installed([_plugin()], tmp_path)
    from evalsi.evaluators import Registry

    registry = add_plugins(Registry(), tmp_path)
    ev = registry.resolve("shouty")
    assert ev.ref == "acme/shouty@1.0.0"
    assert ev.manifest.params_schema == shouty.manifest.params_schema
    assert ev.manifest.batchable  # a batch goes to the plugin as one Evaluate
    assert ev.source == {"plugin": "acme", "plugin_version": "1.2.0"}


def test_no_file_is_no_plugin(tmp_path: Path) -> None:
    assert load_installed(tmp_path) == []


@pytest.mark.parametrize("text", ["{not json", json.dumps({"version": 99, "plugins": []})])
def test_an_unreadable_file_names_itself(tmp_path: Path, text: str) -> None:
    registry_file(tmp_path).parent.mkdir(parents=True)
    registry_file(tmp_path).write_text(text)
    with pytest.raises(UserError, match=r"plugins\.json"):
        load_installed(tmp_path)
