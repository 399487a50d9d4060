"""The tamper suite: any change to a sealed bundle is refused, and a hostile bundle is a finding,
never a read outside it, a hang or a write.

Two real bundles are sealed once per module (a Score run with a system declaration, and the
helpdesk pack's scripted agent run, whose trajectories, tool calls and end states are not
empty), and every case works on its own copy. 1,000 seeded random mutations per bundle (a
byte flipped, a file deleted, truncated, added, appended to, renamed or two swapped) must all
be refused by ``validate_bundle``, and every 50th by ``gate_bundle`` and ``rescore_bundle`` too.

The gaps this suite first found are fixed and pinned here: bytes of manifest.json beyond the
fields the checks read (its whitespace, its writer, keys the format lacks), edits that once
crashed validate instead of a finding, a gates.json that is not an object, and a config whose
shape once crashed rescore.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import stat
import string
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

import evalsi
from evalsi.core import UserError
from evalsi.evidence import REQUIRED, gate_bundle, rescore_bundle, validate_bundle, write_bundle
from evalsi.runs import open_store
from tests.support.bundles import reseal as _reseal

ROOT = Path(__file__).resolve().parents[3]
PACK = ROOT / "examples" / "agent" / "helpdesk"
GOOD = PACK / "run-scripted-good.yaml"
SYSTEM = PACK / "system.yaml"
EVERYTHING = ROOT / ".tools" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.json.sig"
MUTATIONS = 1000
SAMPLE_EVERY = 50
"""Every 50th mutation also goes through gate and rescore (each validates first, then reads)."""
HANG = 10.0

DECLARATION = """\
apiVersion: evals.si/v1alpha1
kind: SystemDeclaration
metadata:
  name: capitals
spec:
  system:
    name: capitals-bot
    version: "1.0.0"
    owner: qa@example.com
  thresholds:
    - {category: billing, min: 0.5}
    - {category: shipping, metric: exact-match, min: 0.5}
"""


@dataclass(frozen=True, slots=True)
class Sealed:
    """A run of a store, and the bundle sealed from it."""

    store: Path
    run_id: str
    bundle: Path


@pytest.fixture(scope="module")
def score(tmp_path_factory: pytest.TempPathFactory) -> Sealed:
    where = tmp_path_factory.mktemp("score")
    data = where / "data.jsonl"
    categories = ("billing", "shipping", "returns")
    rows = (
        {
            "id": f"q{i}",
            "input": f"the capital of France? ({i})",
            "output": "Lyon" if i % 4 == 0 else "Paris",
            "reference": "Paris",
            "metadata": {"category": categories[i % 3]},
        }
        for i in range(30)
    )
    data.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    (where / "system.yaml").write_text(DECLARATION)
    db = where / "s.db"
    result = evalsi.evaluate(
        str(data),
        ["exact-match", "contains"],
        store=str(db),
        declaration=str(where / "system.yaml"),
    )
    store = open_store(str(db))
    try:
        write_bundle(store, result.run_id, where / "bundle")
    finally:
        store.close()
    sealed = Sealed(db, result.run_id, where / "bundle")
    _controls(sealed.bundle)
    return sealed


def _controls(bundle: Path) -> None:
    """The untouched bundle passes all three: a refusal below is the mutation's doing."""
    assert validate_bundle(bundle).exit_code == 0
    assert gate_bundle(bundle).exit_code == 0
    assert rescore_bundle(bundle).exit_code == 0


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Sealed:
    """The helpdesk pack's known-good run through the CLI, as its header says (~4 s)."""
    if not EVERYTHING.exists() or shutil.which("node") is None:
        pytest.skip("@modelcontextprotocol/server-everything is not installed (.ci/run does)")
    where = tmp_path_factory.mktemp("agent")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(PACK)]),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "evalsi", "run", "-f", str(GOOD.relative_to(ROOT)),
         "--declaration", str(SYSTEM.relative_to(ROOT)), "--bundle", str(where / "bundle"),
         "--store", str(where / "s.db"), "-q"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = orjson.loads((where / "bundle" / "metadata.json").read_bytes())["run_id"]
    sealed = Sealed(where / "s.db", run_id, where / "bundle")
    for name in ("trajectories.jsonl", "tool_calls.jsonl", "end_states.jsonl"):
        assert (sealed.bundle / name).stat().st_size > 0, name
    _controls(sealed.bundle)
    return sealed


@pytest.fixture
def bundle(score: Sealed, tmp_path: Path) -> Path:
    """A fresh copy of the Score bundle, alone in its own parent directory."""
    path = tmp_path / "parent" / "bundle"
    shutil.copytree(score.bundle, path)
    return path


# -- mutations ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Mutation:
    """One change to a bundle: what, to which file, where."""

    kind: str  # flip | delete | truncate | add | append | rename | swap
    file: str
    offset: int = 0  # flip: the byte; truncate: the new length; append: the old end
    mask: int = 0  # flip: xor'ed into the byte
    data: bytes = b""  # add, append
    other: str = ""  # rename: the new name; swap: the other file

    def __str__(self) -> str:
        if self.kind == "flip":
            return f"flip byte {self.offset} of {self.file} (xor 0x{self.mask:02x})"
        if self.kind == "truncate":
            return f"truncate {self.file} to {self.offset} bytes"
        if self.kind == "append":
            shown = f"{self.data[:16]!r} ({len(self.data)} bytes)"
            return f"append {shown} to {self.file} at {self.offset}"
        if self.kind == "add":
            return f"add {self.file!r} ({len(self.data)} bytes)"
        if self.kind == "rename":
            return f"rename {self.file} to {self.other!r}"
        if self.kind == "swap":
            return f"swap {self.file} and {self.other}"
        return f"delete {self.file}"

    def apply(self, directory: Path) -> None:
        path = directory / self.file
        if self.kind == "flip":
            data = bytearray(path.read_bytes())
            data[self.offset] ^= self.mask
            path.write_bytes(bytes(data))
        elif self.kind == "truncate":
            os.truncate(path, self.offset)
        elif self.kind == "append":
            with path.open("ab") as f:
                f.write(self.data)
        elif self.kind == "add":
            path.write_bytes(self.data)
        elif self.kind == "rename":
            path.rename(directory / self.other)
        elif self.kind == "swap":
            path.rename(directory / ".swap")
            (directory / self.other).rename(path)
            (directory / ".swap").rename(directory / self.other)
        else:
            path.unlink()


KINDS: tuple[str, ...] = (
    *("flip",) * 8,
    *("truncate",) * 3,
    *("delete", "add", "append", "rename") * 2,
    "swap",
)
"""Drawn at random: a byte flip is the likeliest tampering, so the commonest."""


def _new_name(rng: random.Random, taken: set[str]) -> str:
    """A name the bundle does not hold: random, hidden, or next to a real one."""
    while True:
        shape = rng.randrange(4)
        stem = "".join(
            rng.choices(string.ascii_letters + string.digits + "_-", k=rng.randint(1, 12))
        )
        if shape == 0:
            name = stem
        elif shape == 1:
            name = "." + stem
        elif shape == 2:
            name = f"{stem}.{rng.choice(('json', 'jsonl', 'md', 'sig'))}"
        else:
            real = rng.choice((*REQUIRED, MANIFEST))
            name = rng.choice(
                (real + "~", real + ".bak", real.upper(), "." + real, real + "." + stem)
            )
        # A manifest.json.sig is the one optional name: unverified, it is a warning by design.
        if name not in taken and name != SIGNATURE:
            return name


def mutations(rng: random.Random, directory: Path, count: int) -> list[Mutation]:
    """``count`` mutations of the bundle at ``directory``; none leaves it byte-identical."""
    contents = {p.name: p.read_bytes() for p in directory.iterdir()}
    names = sorted(contents)
    nonempty = [n for n in names if contents[n]]
    out: list[Mutation] = []
    while len(out) < count:
        kind = rng.choice(KINDS)
        if kind == "flip":
            name = rng.choice(nonempty)
            offset = rng.randrange(len(contents[name]))
            out.append(Mutation(kind, name, offset=offset, mask=rng.randrange(1, 256)))
        elif kind == "truncate":
            name = rng.choice(nonempty)
            length = 0 if rng.random() < 0.2 else rng.randrange(len(contents[name]))
            out.append(Mutation(kind, name, offset=length))
        elif kind == "append":
            name = rng.choice(names)
            data = rng.randbytes(rng.randint(1, 64))
            out.append(Mutation(kind, name, offset=len(contents[name]), data=data))
        elif kind == "add":
            data = rng.randbytes(rng.choice((0, rng.randint(1, 256))))
            out.append(Mutation(kind, _new_name(rng, set(names)), data=data))
        elif kind == "rename":
            name = rng.choice(names)
            onto = [n for n in names if n != name and contents[n] != contents[name]]
            if rng.random() < 0.3 and onto:
                out.append(Mutation(kind, name, other=rng.choice(onto)))
            else:
                out.append(Mutation(kind, name, other=_new_name(rng, set(names))))
        elif kind == "swap":
            a, b = rng.sample(names, 2)
            if contents[a] != contents[b]:  # two empty files swapped are the same bundle
                out.append(Mutation(kind, a, other=b))
        else:
            out.append(Mutation(kind, rng.choice(names)))
    return out


CHECKED = ("files", "format", "format_version", "required", "run_id")
"""The fields of manifest.json the file checks read; the edits below leave them as they were."""


@pytest.mark.parametrize("which", ["score", "agent"])
def test_every_random_mutation_of_a_bundle_is_refused(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    sealed: Sealed = request.getfixturevalue(which)
    rng = random.Random(f"evalsi-tamper-{which}")
    plan = mutations(rng, sealed.bundle, MUTATIONS)
    accepted: list[str] = []
    case = tmp_path / "case"
    for i, m in enumerate(plan):
        shutil.copytree(sealed.bundle, case)
        m.apply(case)
        try:
            code = validate_bundle(case).exit_code
            if code == 0:
                accepted.append(f"{m}: validate exit 0")
            if i % SAMPLE_EVERY == 0:
                if (g := gate_bundle(case).exit_code) != 2:
                    accepted.append(f"{m}: gate exit {g}")
                if (r := rescore_bundle(case).exit_code) != 2:
                    accepted.append(f"{m}: rescore exit {r}")
        except Exception as e:  # noqa: BLE001 - a crash is a finding too: name its mutation
            accepted.append(f"{m}: raised {type(e).__name__}: {e}")
        shutil.rmtree(case)
    shown = "\n".join(accepted[:40])
    assert not accepted, f"{len(accepted)} of {len(plan)} mutations of the {which} bundle:\n{shown}"
    # Every file was flipped, truncated (non-empty ones) and deleted, and every kind ran.
    files = {p.name for p in sealed.bundle.iterdir()}
    nonempty = {n for n in files if (sealed.bundle / n).stat().st_size}
    assert {m.file for m in plan if m.kind == "flip"} == nonempty
    assert {m.file for m in plan if m.kind == "truncate"} == nonempty
    assert any(m.kind == "truncate" and m.offset == 0 for m in plan)
    assert {m.file for m in plan if m.kind == "delete"} == files
    assert {m.kind for m in plan} == set(KINDS)


# -- every byte of manifest.json is bound, not only the fields the checks read ------------------


MANIFEST_EDITS: dict[str, Callable[[bytes], bytes]] = {
    "writer": lambda data: data.replace(b'"writer": "evalsi ', b'"writer": "forged '),
    "writer-key": lambda data: data.replace(b'"writer":', b'"wrjter":'),
    "indent": lambda data: data.replace(b'\n  "format":', b'\n\t"format":'),
    "last-newline": lambda data: data.removesuffix(b"\n"),
    "appended": lambda data: data + b"\r\n",
    "extra-key": lambda data: data.replace(b'{\n  "files"', b'{\n  "forged": 1,\n  "files"'),
}
"""Changes to manifest.json that leave everything a check reads of it as it was."""


@pytest.mark.parametrize("edit", MANIFEST_EDITS)
def test_the_manifest_edits_change_only_what_no_check_reads(edit: str, score: Sealed) -> None:
    """The control for the test below: each edit changes the bytes, not the fields read."""
    data = (score.bundle / MANIFEST).read_bytes()
    changed = MANIFEST_EDITS[edit](data)
    assert changed != data
    before, after = orjson.loads(data), orjson.loads(changed)
    assert {k: after.get(k) for k in CHECKED} == {k: before.get(k) for k in CHECKED}


@pytest.mark.parametrize("edit", MANIFEST_EDITS)
def test_a_change_to_bytes_of_the_manifest_no_check_reads_is_refused(
    edit: str, bundle: Path
) -> None:
    path = bundle / MANIFEST
    path.write_bytes(MANIFEST_EDITS[edit](path.read_bytes()))
    assert validate_bundle(bundle).exit_code != 0


# -- hostile bundles ---------------------------------------------------------------------------


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()`` on a daemon thread; fails the test if it has not returned in ``seconds``."""
    box: list[Any] = []
    errors: list[BaseException] = []

    def go() -> None:
        try:
            box.append(call())
        except BaseException as e:  # noqa: BLE001 - raised again on the test's thread
            errors.append(e)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"hung: no answer in {seconds} s")
    if errors:
        raise errors[0]
    return box[0]


class Canary:
    """A FIFO that tells whether anything opened it: a writer waits in ``open`` until a reader
    comes, so if a check ever opens the path, the writer wakes.

    The writer must be waiting before the check runs (an open before would go unseen), so the
    constructor returns only once the kernel says it sleeps in ``wait_for_partner`` (Linux).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self._opened = threading.Event()
        self._thread = threading.Thread(target=self._wait, daemon=True)
        self._thread.start()
        wchan = Path(f"/proc/self/task/{self._thread.native_id}/wchan")
        deadline = time.monotonic() + 5
        while not wchan.exists() or wchan.read_text() != "wait_for_partner":
            if time.monotonic() > deadline:
                self.opened()
                pytest.skip("cannot tell that the canary's writer waits (no /proc wchan)")
            time.sleep(0.001)

    def _wait(self) -> None:
        fd = os.open(self.path, os.O_WRONLY)
        self._opened.set()
        os.close(fd)

    def opened(self) -> bool:
        """Whether it was opened; then the writer is released."""
        opened = self._opened.wait(0.2)
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self._thread.join(5)
        os.close(fd)
        return opened


def test_the_canary_sees_an_open(tmp_path: Path) -> None:
    canary = Canary(tmp_path / "fifo")
    os.close(os.open(tmp_path / "fifo", os.O_RDONLY | os.O_NONBLOCK))
    assert canary.opened()
    assert not Canary(tmp_path / "other").opened()


def _refused(bundle: Path, expect: str) -> None:
    v = _within(HANG, lambda: validate_bundle(bundle))
    assert v.exit_code == 1, (v.findings, v.unreadable)
    assert any(expect in f for f in v.findings), v.findings
    assert _within(HANG, lambda: gate_bundle(bundle)).exit_code == 2
    assert _within(HANG, lambda: rescore_bundle(bundle)).exit_code == 2


def test_a_link_to_an_outside_copy_of_a_content_file_is_refused(bundle: Path) -> None:
    outside = bundle.parent / "records.jsonl"
    (bundle / "records.jsonl").rename(outside)  # the very bytes the manifest hashes
    (bundle / "records.jsonl").symlink_to(outside)
    _refused(bundle, "records.jsonl: is a symbolic link")


@pytest.mark.parametrize("name", ["records.jsonl", MANIFEST, "metadata.json", SIGNATURE, "x"])
def test_a_link_is_never_followed(name: str, bundle: Path) -> None:
    canary = Canary(bundle.parent / "outside")
    (bundle / name).unlink(missing_ok=True)
    (bundle / name).symlink_to(canary.path)
    v = _within(HANG, lambda: validate_bundle(bundle))
    _within(HANG, lambda: gate_bundle(bundle))
    _within(HANG, lambda: rescore_bundle(bundle))
    assert not canary.opened()
    assert v.exit_code == 1
    assert f"{name}: is a symbolic link; a bundle holds only regular files (not read)" in v.findings


def test_a_fifo_in_place_of_records_does_not_block(bundle: Path) -> None:
    (bundle / "records.jsonl").unlink()
    canary = Canary(bundle / "records.jsonl")
    _refused(bundle, "records.jsonl: is a FIFO")
    assert not canary.opened()


def test_a_device_in_place_of_records_is_not_read(bundle: Path) -> None:
    (bundle / "records.jsonl").unlink()
    try:  # /dev/zero: read, it would never end
        os.mknod(bundle / "records.jsonl", stat.S_IFCHR | 0o644, os.makedev(1, 5))
    except OSError as e:
        pytest.skip(f"cannot create a device node here ({e.strerror})")
    _refused(bundle, "records.jsonl: is a device")


def test_a_socket_in_place_of_records_is_refused(bundle: Path) -> None:
    (bundle / "records.jsonl").unlink()
    path = str(bundle / "records.jsonl")
    if len(path.encode()) >= 100:
        pytest.skip("the temporary path is too long for a unix socket")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(path)
        _refused(bundle, "records.jsonl: is a socket")


@pytest.mark.parametrize("in_place", [True, False], ids=["in-place-of-records", "extra"])
def test_a_subdirectory_is_refused(in_place: bool, bundle: Path) -> None:
    name = "records.jsonl" if in_place else "sub"
    (bundle / name).unlink(missing_ok=True)
    (bundle / name).mkdir()
    (bundle / name / "records.jsonl").write_bytes((bundle / "cases.jsonl").read_bytes())
    _refused(bundle, f"{name}: is a directory")


def _listing(bundle: Path, path: str, *, replace: str | None = None) -> None:
    """The manifest rewritten to list ``path``: in place of ``replace``'s entry, or added."""
    manifest = orjson.loads((bundle / MANIFEST).read_bytes())
    entry = {"path": path, "size": 0, "sha256": "sha256:" + "0" * 64}
    if replace is None:
        manifest["files"].append(entry)
    else:
        for e in manifest["files"]:
            if e["path"] == replace:
                e["path"] = path
    (bundle / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))


@pytest.mark.parametrize("replace", [None, "records.jsonl"], ids=["added", "replacing"])
@pytest.mark.parametrize(
    "path",
    ["../outside", "OUTSIDE", "/etc/passwd", "sub/records.jsonl", "./records.jsonl", "..", ".",
     "", "records.jsonl\0", "records.jsonl/", "~/records.jsonl", "..\\outside", MANIFEST,
     SIGNATURE],
)  # fmt: skip
def test_a_manifest_path_that_is_not_a_plain_content_file_name_is_refused(
    path: str, replace: str | None, bundle: Path
) -> None:
    canary = Canary(bundle.parent / "outside")
    _listing(bundle, str(canary.path) if path == "OUTSIDE" else path, replace=replace)
    v = _within(HANG, lambda: validate_bundle(bundle))
    assert not canary.opened()
    assert v.exit_code == 1, v.findings
    assert any(f.startswith("manifest.json: files[") for f in v.findings), v.findings


def test_a_content_file_listed_twice_is_refused(bundle: Path) -> None:
    manifest = orjson.loads((bundle / MANIFEST).read_bytes())
    manifest["files"].append(dict(manifest["files"][3]))
    (bundle / MANIFEST).write_bytes(orjson.dumps(manifest))
    _refused(bundle, "records.jsonl is listed twice")


def test_a_bundle_path_that_is_a_link_cannot_be_read(bundle: Path) -> None:
    link = bundle.parent / "link"
    link.symlink_to(bundle)
    v = validate_bundle(link)
    assert v.exit_code == 2
    assert "symbolic link" in str(v.unreadable)
    assert gate_bundle(link).exit_code == 2
    assert rescore_bundle(link).exit_code == 2


@pytest.mark.parametrize("what", ["file", "missing"])
def test_a_bundle_path_that_is_no_directory_cannot_be_read(what: str, tmp_path: Path) -> None:
    path = tmp_path / "bundle"
    if what == "file":
        path.write_bytes(b"{}")
    v = validate_bundle(path)
    assert v.exit_code == 2, v.findings
    assert gate_bundle(path).exit_code == 2
    assert rescore_bundle(path).exit_code == 2


def test_an_empty_directory_is_invalid(tmp_path: Path) -> None:
    v = validate_bundle(tmp_path)
    assert v.exit_code == 1
    assert v.findings == ["manifest.json: missing (a bundle cut short, or not a bundle)"]


def test_a_newer_format_version_cannot_be_read(bundle: Path) -> None:
    manifest = orjson.loads((bundle / MANIFEST).read_bytes())
    manifest["format_version"] += 1
    (bundle / MANIFEST).write_bytes(orjson.dumps(manifest))
    v = validate_bundle(bundle)
    assert v.exit_code == 2
    assert "newer evalsi" in str(v.unreadable)
    assert gate_bundle(bundle).exit_code == 2


@pytest.mark.parametrize(
    "text", [b"", b"not json", b"[]", b"{", b"\xff\xfe", b'{"format": "evalsi-bundle"}']
)
def test_a_manifest_that_is_not_a_manifest_is_invalid(text: bytes, bundle: Path) -> None:
    (bundle / MANIFEST).write_bytes(text)
    _refused(bundle, "manifest.json: ")


def _tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under ``root`` (links not followed): mode, size, mtime."""
    out = {}
    for top, dirs, files in os.walk(root):
        for name in (".", *dirs, *files):
            st = os.lstat(os.path.join(top, name))
            out[os.path.relpath(os.path.join(top, name), root)] = (
                st.st_mode,
                st.st_size,
                st.st_mtime_ns,
            )
    return out


@pytest.mark.parametrize("hostile", [False, True], ids=["valid", "hostile"])
def test_validate_gate_and_rescore_write_nothing(hostile: bool, bundle: Path) -> None:
    if hostile:
        (bundle / "records.jsonl").unlink()
        os.mkfifo(bundle / "records.jsonl")
        (bundle / "extra").symlink_to(bundle.parent / "nowhere")
        (bundle / "sub").mkdir()
    before = _tree(bundle.parent)
    time.sleep(0.01)  # a write now would move an mtime
    codes = (
        _within(HANG, lambda: validate_bundle(bundle)).exit_code,
        _within(HANG, lambda: gate_bundle(bundle)).exit_code,
        _within(HANG, lambda: rescore_bundle(bundle)).exit_code,
    )
    assert codes == ((1, 2, 2) if hostile else (0, 0, 0))
    assert _tree(bundle.parent) == before


# -- malformed content: a finding, never a crash ----------------------------------------------


def _at(*keys: str | int, value: Any) -> Callable[[Any], Any]:
    """A change setting ``doc[k1][k2]...`` to ``value``."""

    def change(doc: Any) -> Any:
        inner = doc
        for key in keys[:-1]:
            inner = inner[key]
        inner[keys[-1]] = value
        return doc

    return change


def _edit(bundle: Path, name: str, line: int | None, change: Callable[[Any], Any]) -> None:
    """A JSON file (``line`` None) or one JSONL line parsed, changed, and written back."""
    path = bundle / name
    if line is None:
        doc = change(orjson.loads(path.read_bytes()))
        path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        return
    lines = path.read_bytes().splitlines(keepends=True)
    doc = change(orjson.loads(lines[line]))
    lines[line] = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS) + b"\n"
    path.write_bytes(b"".join(lines))


def _case(id: str, which: str, name: str, line: int | None, change: Callable[[Any], Any]) -> Any:
    """One edit of one file of one bundle."""
    return pytest.param(which, name, line, change, id=id)


NOT_AN_OBJECT = "is not an object"
EDITS = [
    _case("record-string", "score", "records.jsonl", 0, _at("record", value="x")),
    _case("trials-string", "score", "metadata.json", None, _at("trials", value="3")),
    _case("scores-string", "score", "scores.jsonl", 0, _at("scores", value="x")),
    _case("summary-a-list", "score", "summary.json", None, lambda doc: [doc]),
    _case("evaluators-string", "score", "config.json", None, _at("evaluators", value="x")),
    _case("steps-number", "agent", "trajectories.jsonl", 0, _at("trajectory", "steps", value=1)),
    _case(
        "record-metadata-string",
        "score",
        "records.jsonl",
        0,
        _at("record", "metadata", value="billing"),
    ),
    _case(
        "counts-string",
        "score",
        "metadata.json",
        None,
        _at("counts", value="x"),
    ),
    _case(
        "plan-scenarios-string",
        "score",
        "test_plan.json",
        None,
        _at("scenarios", value="x"),
    ),
    _case(
        "plan-selected-number",
        "score",
        "test_plan.json",
        None,
        _at("scenarios", "selected", value=5),
    ),
    _case(
        "plan-selected-numbers",
        "score",
        "test_plan.json",
        None,
        _at("scenarios", "selected", value=[5]),
    ),
    _case(
        "tool-call-string",
        "agent",
        "trajectories.jsonl",
        0,
        _at("trajectory", "steps", 0, "tool_call", value="x"),
    ),
]
"""Edits that keep a file parseable: the checksums refuse them (no reseal here), and the
checks after the checksums must not crash on them either."""


@pytest.mark.parametrize(("which", "name", "line", "change"), EDITS)
def test_an_edited_file_that_still_parses_is_a_finding_never_a_crash(
    which: str,
    name: str,
    line: int | None,
    change: Callable[[Any], Any],
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    sealed: Sealed = request.getfixturevalue(which)
    bundle = tmp_path / "bundle"
    shutil.copytree(sealed.bundle, bundle)
    _edit(bundle, name, line, change)
    v = validate_bundle(bundle)
    assert v.exit_code == 1, v.findings
    assert gate_bundle(bundle).exit_code == 2
    assert rescore_bundle(bundle).exit_code == 2


def test_a_resealed_forged_report_is_refused(bundle: Path) -> None:
    """The control for the next test: resealing alone does not get a forged report through."""
    (bundle / "report.md").write_bytes(b"# Every threshold met. Ship it.\n")
    _reseal(bundle)
    _refused(bundle, "report.md: is not the report its plan, summary and gates give")


def test_a_resealed_gates_file_that_is_not_an_object_is_refused(bundle: Path) -> None:
    (bundle / "gates.json").write_bytes(b"[]\n")
    (bundle / "report.md").write_bytes(b"# Every threshold met. Ship it.\n")
    _reseal(bundle)
    assert validate_bundle(bundle).exit_code == 1


def test_rescore_of_a_config_whose_manifest_is_not_an_object_is_an_outcome(bundle: Path) -> None:
    _edit(bundle, "config.json", None, _at("manifest", value="x"))
    _reseal(bundle)
    assert validate_bundle(bundle).exit_code == 1  # validate reads its shape now
    assert rescore_bundle(bundle).exit_code == 2


# -- write_bundle ------------------------------------------------------------------------------


def _write(score: Sealed, out: Path) -> None:
    store = open_store(str(score.store))
    try:
        write_bundle(store, score.run_id, out)
    finally:
        store.close()


def test_write_bundle_refuses_a_directory_that_is_not_empty(score: Sealed, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_bytes(b"mine")
    with pytest.raises(UserError, match="is not empty"):
        _write(score, out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert (out / "keep.txt").read_bytes() == b"mine"


@pytest.mark.parametrize("target", ["empty-dir", "dangling"])
def test_write_bundle_refuses_an_output_path_that_is_a_link(
    target: str, score: Sealed, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    if target == "empty-dir":
        elsewhere.mkdir()
    out = tmp_path / "out"
    out.symlink_to(elsewhere)
    with pytest.raises(UserError, match="is a symbolic link"):
        _write(score, out)
    assert out.is_symlink()
    assert (list(elsewhere.iterdir()) == []) if target == "empty-dir" else not elsewhere.exists()


def test_write_bundle_into_an_empty_directory_validates(score: Sealed, tmp_path: Path) -> None:
    """The control: the refusals above are about the path, not the run."""
    out = tmp_path / "out"
    out.mkdir()
    _write(score, out)
    assert validate_bundle(out).exit_code == 0
