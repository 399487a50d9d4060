"""Integration tests run in the process, in a temporary working directory, so a default store
(``.evalsi/evalsi.db`` under the cwd) never lands in the repository."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _in_tmp_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVALSI_DEBUG", raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "api.db"
