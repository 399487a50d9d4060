from pathlib import Path

import pytest

from evalsi.core import UserError
from evalsi.datasets import confine


def test_a_relative_path_inside_the_root_resolves(tmp_path: Path) -> None:
    (tmp_path / "qa").mkdir()
    assert confine(tmp_path, "qa/v1.jsonl") == (tmp_path / "qa" / "v1.jsonl").resolve()


@pytest.mark.parametrize("name", ["/etc/passwd", "../x.jsonl", "qa/../../x", "", "a\x00b"])
def test_paths_leaving_the_root_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(UserError):
        confine(tmp_path, name)


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(UserError, match="outside"):
        confine(root, "link/secret.jsonl")
