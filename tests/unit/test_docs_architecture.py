"""``docs/ARCHITECTURE.md`` tells the truth about the tree, the layers and the store.

The "Packages" table has one row per package under ``src/evalsi/`` (a directory with an
``__init__.py``; ``_proto/``, generated code, is described under "Other folders"). Its
"may import" column names, besides third-party packages (not checked), the evalsi packages the
row's package imports. The rule held here, for every row:

    what it imports  ⊆  what the column names  ⊆  what the contracts allow

- *what it imports*: every evalsi package that some module of the package imports, lazily or
  not, from the import graph import-linter itself checks (``grimp``);
- *what the contracts allow*: the packages of strictly lower layers of the layers contract in
  ``pyproject.toml``, minus what a forbidden contract forbids it (the server and the client); and
  ``_proto``, unless a forbidden contract keeps the generated code out of the package.

So the column never names a package of the same or a higher layer (that would be a lie about
the layering, whatever the code does), and never omits one the package really uses (a reader
deciding what a change may break can trust it). Requiring the whole of the lower layers instead
would make every row of the top layers a list of everything, which says nothing.

The layer diagram under "Layers" lists the same layers as the contract, in the same order.

The store's schema version, wherever ``docs/`` states it (the decision records, which tell
history, aside), is ``evalsi.store._schema.SCHEMA_VERSION``.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import grimp
import pytest

from evalsi.store._schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "evalsi"
DOC = ROOT / "docs" / "ARCHITECTURE.md"
GENERATED = "_proto"


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, f"docs/ARCHITECTURE.md has no '## {title}' section"
    return match.group(1)


@cache
def _table() -> dict[str, tuple[str, str]]:
    """package -> (owns, may import), from the "Packages" table."""
    rows: dict[str, tuple[str, str]] = {}
    for line in _section("Packages").splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 3, f"a row of the Packages table needs 3 cells: {line[:80]}"
        match = re.fullmatch(r"`([a-z_]+)/`", cells[0])
        assert match, f"a row of the Packages table names a package as `name/`: {cells[0]}"
        assert match.group(1) not in rows, f"two rows for {cells[0]}"
        rows[match.group(1)] = (cells[1], cells[2])
    return rows


def _packages() -> set[str]:
    return {
        p.name
        for p in SRC.iterdir()
        if p.is_dir() and (p / "__init__.py").exists() and p.name != GENERATED
    }


def _named(column: str) -> set[str]:
    """The evalsi packages a "may import" column names: the first word of each item, items
    separated by commas or semicolons (what follows in parentheses is a remark)."""
    known = _packages() | {GENERATED}
    names = set()
    for item in re.split(r"[,;]", column):
        match = re.match(r"\s*`?([A-Za-z_][\w.-]*)`?", item)
        if match and match.group(1) in known:
            names.add(match.group(1))
    return names


@cache
def _contracts() -> list[dict[str, Any]]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        config = tomllib.load(f)
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return contracts


@cache
def _layers() -> tuple[frozenset[str], ...]:
    """The layers contract, top first, as sets of top-level package names."""
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    out = []
    for layer in layers["layers"]:
        names = [m.strip() for m in layer.split("|")]
        assert all(n.startswith("evalsi.") and n.count(".") == 1 for n in names), layer
        out.append(frozenset(n.removeprefix("evalsi.") for n in names))
    return tuple(out)


def _forbidden(package: str) -> set[str]:
    """evalsi packages a forbidden contract keeps out of ``package``."""
    out = set()
    for c in _contracts():
        if c["type"] == "forbidden" and f"evalsi.{package}" in c["source_modules"]:
            out |= {
                m.removeprefix("evalsi.") for m in c["forbidden_modules"] if m.startswith("evalsi.")
            }
    return out


def _allowed(package: str) -> set[str]:
    layers = _layers()
    (level,) = [i for i, layer in enumerate(layers) if package in layer]
    lower = set().union(*layers[level + 1 :])
    return (lower | {GENERATED}) - _forbidden(package)


@cache
def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("evalsi")


def _imports(package: str) -> set[str]:
    """evalsi packages some module of ``package`` imports (``_proto`` included)."""
    graph = _graph()
    known = _packages() | {GENERATED}
    root = f"evalsi.{package}"
    out = set()
    for module in graph.find_descendants(root) | {root}:
        for imported in graph.find_modules_directly_imported_by(module):
            parts = imported.split(".")
            if len(parts) > 1 and parts[1] in known and parts[1] != package:
                out.add(parts[1])
    return out


def test_every_package_has_one_row_and_every_row_a_package() -> None:
    packages, rows = _packages(), set(_table())
    assert not packages - rows, f"packages missing from the Packages table: {packages - rows}"
    assert not rows - packages, f"rows naming no package under src/evalsi/: {rows - packages}"


def test_every_package_sits_in_a_layer() -> None:
    layered = set().union(*_layers())
    assert layered == _packages(), (
        f"not in the layers contract: {_packages() - layered}; "
        f"in it but not a package: {layered - _packages()}"
    )


@pytest.mark.parametrize("package", sorted(_packages()))
def test_may_import_is_true_to_the_code_and_the_contracts(package: str) -> None:
    named = _named(_table()[package][1])
    imports, allowed = _imports(package), _allowed(package)
    assert not imports - named, (
        f"`{package}/` imports {sorted(imports - named)}, which its 'may import' column omits"
    )
    assert not named - allowed, (
        f"`{package}/` may not import {sorted(named - allowed)} (same or higher layer, or a "
        f"forbidden contract), yet its 'may import' column names them"
    )


def test_the_layer_diagram_is_the_contract() -> None:
    block = re.search(r"```\n(.*?)```", _section("Layers"), re.S)
    assert block, "the Layers section has no diagram"
    diagram: list[set[str]] = []
    for line in block.group(1).splitlines():
        names = set(re.findall(r"evalsi\.(\w+)", line))
        if line.lstrip().startswith("|"):
            diagram[-1] |= names  # a layer continued on the next line
        elif names:
            diagram.append(names)
    assert diagram == [set(layer) for layer in _layers()]


def test_the_stated_schema_version_is_the_code_s() -> None:
    stated = []
    for path in sorted((ROOT / "docs").rglob("*.md")):
        if "decisions" in path.parts:
            continue  # history: "earlier versions record schema = 1" stays true
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"`?schema`?\s*(?:=|, currently)\s*(\d+)", text):
            stated.append((path.relative_to(ROOT).as_posix(), int(match.group(1))))
    assert ("docs/ARCHITECTURE.md", SCHEMA_VERSION) in stated
    assert all(version == SCHEMA_VERSION for _, version in stated), (
        f"the store's schema is at version {SCHEMA_VERSION}; the docs say {stated}"
    )
