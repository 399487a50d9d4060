"""The server example config loads as written."""

from pathlib import Path

from evalsi.server._config import load_config

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "evalsi.yaml"


def test_the_example_config_loads_with_paths_beside_the_repo() -> None:
    config = load_config(EXAMPLE)
    root = EXAMPLE.parent.parent
    assert (config.host, config.port, config.max_concurrent_runs) == ("127.0.0.1", 8080, 4)
    assert config.datasets_dir == root / ".evalsi" / "datasets"
    assert config.store == str(root / ".evalsi" / "evalsi.db")
    assert not config.allow_python_targets
