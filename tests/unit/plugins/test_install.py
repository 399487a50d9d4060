"""What `evalsi plugin install` refuses before building anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.core import UserError
from evalsi.plugins import install_plugin, remove_plugin


def test_a_missing_folder_is_named_and_builds_no_venv(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"\./no-such-plugin: no such file or folder"):
        install_plugin("./no-such-plugin", base=tmp_path)
    assert not (tmp_path / "plugins").exists()


def test_an_address_nobody_serves_is_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"plugin '.*ghost\.sock' did not start: nothing listened"):
        install_plugin(f"unix:{tmp_path / 'ghost.sock'}", base=tmp_path, start_timeout_s=0.2)


def test_removing_what_is_not_installed_names_what_is(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no plugin 'acme' is installed \(installed: none\)"):
        remove_plugin("acme", tmp_path)
