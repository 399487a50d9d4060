"""OWASP API Security Top 10 checks on the REST surface of a real server with identity on.

* API1 broken object-level authorization: another project's objects are 404 to every key of
  this one (the whole table is ``test_int_auth_scope``; here the cases where the object is
  named somewhere else than its id: a policy's label, a review file's header, a page token).
* API3/API6 mass assignment: a body that sets ``created_by``, a ``project_id`` outside the
  caller's grant, or a role the caller lacks takes no effect — ``created_by`` always comes
  from the principal, another project is 404, a role not held is 403, an unknown field 400.
* API3 excessive data exposure: 401/403/404 bodies are the same for what exists elsewhere and
  what exists nowhere, and no error body carries internals (a stack trace, SQL, a path of the
  server's disk, a credential).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from joserfc.jwk import RSAKey

from evalsi.server import load_config
from evalsi.server._state import ServerState
from tests.support.asgi_server import AsgiServer
from tests.support.auth_rig import PROJECTS, SECRET, config_doc, http, token, write_config
from tests.support.jwks_server import JwksServer
from tests.support.server_state import server_state, serving

POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: NAME, labels: LABELS}
spec:
  cascade:
    - {ref: contains, params: {values: [thanks]}}
"""
SPEC = {
    "apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "r"},
    "spec": {"target": {"model": {"connector": "openai-compatible", "model": "m",
                                   "baseUrl": "http://127.0.0.1:9/v1"}},
             "dataset": {"path": "d.jsonl"}, "evaluators": [{"ref": "exact-match"}]},
}  # fmt: skip
RECORDS = [{"id": "1", "output": {"text": "a"}, "reference": {"text": "a"}}]
# What an error body must never hold: a traceback, SQL, a module's file, an exception's repr.
INTERNALS = re.compile(
    r"(?i:Traceback|File \"|\.py\b|site-packages|sqlalchemy|sqlite|psycopg|Error\(|Exception\b)"
    r"|\b(SELECT|INSERT INTO|UPDATE|DELETE FROM|WHERE)\b|0x[0-9a-f]{6,}"
)


@dataclass
class Served:
    server: AsgiServer
    state: ServerState
    tmp: Path
    idp: tuple[JwksServer, RSAKey]

    @property
    def url(self) -> str:
        return self.server.url

    def call(self, key: str, path: str, body: Any = None, method: str = "") -> tuple[int, Any, str]:
        return http(
            self.url + path,
            SECRET[key],
            body=body,
            method=method or ("GET" if body is None else "POST"),
        )

    def runs_of(self, project: str) -> list[dict[str, Any]]:
        status, body, text = self.call("owner", f"/v1alpha1/runs?projectId={project}")
        assert status == 200, text
        return list(body["runs"])


@contextmanager
def _serve(tmp: Path) -> Iterator[Served]:
    """A server with both projects and every key of the rig, its OIDC provider on loopback."""
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    with JwksServer(key) as jwks:
        config = load_config(write_config(tmp, config_doc(jwks.url, jwks.jwks_url)))
        state = server_state(tmp, auth=config.auth)
        for project in ("default", *PROJECTS):  # each project reads its own datasets
            where = state.config.datasets_dir_of(project)
            where.mkdir(parents=True, exist_ok=True)
            (where / "d.jsonl").write_text('{"id": "1", "input": "q", "reference": "a"}\n')
        with serving(state) as server:
            yield Served(server, state, tmp, (jwks, key))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with _serve(tmp_path_factory.mktemp("owasp")) as s:
        yield s


def _errors_are_plain(status: int, body: Any, text: str, *secrets: str, sent: str = "") -> None:
    """An error answer: Connect's shape and nothing else, no internals, no credential, no
    path of the server's disk (``sent``: what the caller sent, which it may be told again)."""
    assert status >= 400, text
    assert isinstance(body, dict), text
    assert set(body) == {"code", "message", "details"}, text
    assert body["details"] == []
    message = body["message"].replace(sent, "SENT") if sent else body["message"]
    assert not INTERNALS.search(message), message
    for place in ("/tmp", "/work", "/home", "/root", "/usr", "/etc"):
        assert place not in message, message
    for secret in secrets:
        assert secret not in text


# -- mass assignment ------------------------------------------------------------------------------
def test_created_by_comes_from_the_principal_whatever_the_body_says(served: Served) -> None:
    forged = {"createdBy": "corp/root", "created_by": "corp/root"}
    for path, body in (
        ("/v1alpha1/runs", {"run": SPEC, "projectId": "alpha"}),
        ("/v1alpha1/evaluate",
         {"records": RECORDS, "evaluators": [{"ref": "exact-match"}], "projectId": "alpha"}),
        ("/v1alpha1/ingest",
         {"clientKey": "mass-1", "projectId": "alpha", "evaluators": [{"name": "judge"}],
          "records": [{"record": {"id": "1", "output": {"text": "x"}},
                       "results": [{"evaluator": "judge", "outcome": "OUTCOME_SKIPPED"}]}]}),
        ("/v1alpha1/projects/alpha/apiKeys", {"name": "forged", "role": "viewer"}),
    ):  # fmt: skip
        before = {r["id"] for r in served.runs_of("alpha")}
        for name, value in forged.items():
            status, answer, text = served.call("admin-a", path, {**body, name: value})
            assert status == 400, (path, text)  # an unknown field is refused, not ignored
            _errors_are_plain(status, answer, text)
        assert {r["id"] for r in served.runs_of("alpha")} == before, path
        # nested where a document has room for it: still the principal's
        if path == "/v1alpha1/runs":
            labelled = json.loads(json.dumps(body))
            labelled["run"]["metadata"]["labels"] = {"created_by": "corp/root"}
            status, answer, text = served.call("editor-a", path, labelled)
            assert status == 200, text
            assert answer["run"]["createdBy"] == "apikey/editor-a"
            run = served.state.store.get_run(answer["run"]["id"])
            assert (run.created_by, run.project_id) == ("apikey/editor-a", "alpha")
    status, made, text = served.call(
        "editor-a",
        "/v1alpha1/ingest",
        {"clientKey": "mass-2", "projectId": "alpha", "evaluators": [{"name": "judge"}],
         "records": [{"record": {"id": "1", "output": {"text": "x"},
                                 "metadata": {"created_by": "corp/root"}},
                      "results": [{"evaluator": "judge", "outcome": "OUTCOME_SKIPPED"}]}]},
    )  # fmt: skip
    assert status == 200, text
    assert served.state.store.get_run(made["run"]["id"]).created_by == "apikey/editor-a"


def test_a_project_outside_the_grant_takes_no_effect(served: Served) -> None:
    before = {r["id"] for r in served.runs_of("beta")}
    for key, path, body in (
        ("editor-a", "/v1alpha1/runs", {"run": SPEC, "projectId": "beta"}),
        ("editor-a", "/v1alpha1/evaluate",
         {"records": RECORDS, "evaluators": [{"ref": "exact-match"}], "projectId": "beta"}),
        ("editor-a", "/v1alpha1/ingest",
         {"clientKey": "k", "projectId": "beta", "evaluators": [{"name": "judge"}],
          "records": [{"record": {"id": "1"},
                       "results": [{"evaluator": "judge", "outcome": "OUTCOME_SKIPPED"}]}]}),
        ("editor-a", "/v1alpha1/ingest:start",
         {"clientKey": "k", "projectId": "beta", "evaluators": [{"name": "judge"}]}),
        ("admin-a", "/v1alpha1/projects/beta/apiKeys", {"name": "in-b", "role": "viewer"}),
        ("admin-a", "/v1alpha1/projects/beta/roleBindings",
         {"role": "viewer", "subject": "user:corp/mallory"}),
    ):  # fmt: skip
        status, answer, text = served.call(key, path, body)
        assert status == 404, (path, text)
        _errors_are_plain(status, answer, text)
    assert {r["id"] for r in served.runs_of("beta")} == before
    keys = served.call("owner", "/v1alpha1/projects/beta/apiKeys")[1]["apiKeys"]
    assert "in-b" not in [k["name"] for k in keys]
    bindings = served.call("owner", "/v1alpha1/projects/beta/roleBindings")[1]["roleBindings"]
    assert "user:corp/mallory" not in [b["subject"] for b in bindings]


def test_a_key_for_another_project_by_path_or_body_is_refused(served: Served) -> None:
    """The path names alpha, the body beta: one of them is refused, never a key in beta."""
    status, answer, text = served.call(
        "admin-a",
        "/v1alpha1/projects/alpha/apiKeys",
        {"name": "sideways", "role": "viewer", "projectId": "beta"},
    )
    if status == 200:
        assert answer["apiKey"]["projectId"] == "alpha", text
    else:
        assert status in (400, 404), text
    keys = served.call("owner", "/v1alpha1/projects/beta/apiKeys")[1]["apiKeys"]
    assert "sideways" not in [k["name"] for k in keys]


def test_a_role_the_caller_lacks_is_not_granted(served: Served) -> None:
    for role in ("owner", "nonexistent"):
        status, answer, text = served.call(
            "admin-a", "/v1alpha1/projects/alpha/apiKeys", {"name": f"up-{role}", "role": role}
        )
        assert status in (400, 403), text
        _errors_are_plain(status, answer, text)
    # an editor holds no access.manage: not even a viewer key
    status, answer, text = served.call(
        "editor-a", "/v1alpha1/projects/alpha/apiKeys", {"name": "e", "role": "viewer"}
    )
    assert status == 403, text
    status, answer, text = served.call(
        "admin-a", "/v1alpha1/projects/alpha/roleBindings",
        {"role": "owner", "subject": "user:corp/mallory"},
    )  # fmt: skip
    assert status == 403, text
    keys = served.call("owner", "/v1alpha1/projects/alpha/apiKeys")[1]["apiKeys"]
    assert not {"up-owner", "up-nonexistent", "e"} & {k["name"] for k in keys}
    jwks, key = served.idp
    # a token's own claims name no role: alice is what the bindings make her (editor of alpha)
    alice = token(key, jwks.url, sub="alice", roles=["owner"], role="admin", groups=["owners"])
    status, me, text = http(served.url + "/v1alpha1/auth/whoami", alice)
    assert status == 200, text
    assert me["roles"] == [{"project": "alpha", "roles": ["editor"]}]
    status, _, text = http(
        served.url + "/v1alpha1/projects/alpha/apiKeys", alice,
        body={"name": "alice-key", "role": "viewer"}, method="POST",
    )  # fmt: skip
    assert status == 403, text


def test_a_policy_label_naming_another_project_takes_no_effect(served: Served) -> None:
    labelled = POLICY.replace("LABELS", "{evals.si/project: beta}")
    # the label alone (the request names no project: the default one, where this key may
    # write policies), by a key with no role in beta: as if the request named beta
    status, answer, text = served.call(
        "editor-d", "/v1alpha1/policies", {"yaml": labelled.replace("NAME", "sneaky")}
    )
    assert status == 404, text
    _errors_are_plain(status, answer, text)
    viewer = POLICY.replace("LABELS", "{evals.si/project: alpha}").replace("NAME", "sneaky")
    status, answer, text = served.call("editor-d", "/v1alpha1/policies", {"yaml": viewer})
    assert status == 404, text  # no role in alpha either
    status, answer, text = served.call("viewer-a", "/v1alpha1/policies", {"yaml": viewer})
    assert status == 404, text  # the gate: no role in the default project
    # the label wins over the request's project_id (as without identity): decided likewise
    body = {"yaml": labelled.replace("NAME", "sneaky"), "projectId": "alpha"}
    status, answer, text = served.call("editor-a", "/v1alpha1/policies", body)
    assert status == 404, text
    listed = served.call("owner", "/v1alpha1/policies")[1]["policies"]
    assert "sneaky" not in [p["name"] for p in listed]
    # where the key may write, the label decides as before
    for name, body in (
        ("labelled", {"yaml": labelled.replace("NAME", "labelled")}),
        ("relabelled", {"yaml": labelled.replace("NAME", "relabelled"), "projectId": "alpha"}),
    ):
        status, answer, text = served.call("owner", "/v1alpha1/policies", body)
        assert status == 200, text
        assert (answer["policy"]["name"], answer["policy"]["projectId"]) == (name, "beta")


def test_promoting_traces_needs_datasets_write_in_the_policys_project(served: Served) -> None:
    """Promoted rows go to the datasets of the policy's project: a caller who may apply
    policies there but not write its datasets cannot apply one that promotes."""
    promoting = POLICY.replace("LABELS", "{}") + (
        "  promote: {when: \"passed('contains') == false\", dataset: regressions}\n"
    )
    body = {"yaml": promoting.replace("NAME", "promoter"), "projectId": "alpha"}
    status, answer, text = served.call("author-a", "/v1alpha1/policies", body)
    assert status == 403, text
    assert "datasets.write" in answer["message"]
    _errors_are_plain(status, answer, text)
    plain = {
        "yaml": POLICY.replace("LABELS", "{}").replace("NAME", "promoter"),
        "projectId": "alpha",
    }
    assert served.call("author-a", "/v1alpha1/policies", plain)[0] == 200  # without promote
    assert served.call("editor-a", "/v1alpha1/policies", body)[0] == 200  # alpha's datasets
    into_beta = {**body, "projectId": "beta"}
    assert served.call("editor-a", "/v1alpha1/policies", into_beta)[0] == 404


def test_each_projects_datasets_are_apart(served: Served) -> None:
    """A dataset uploaded to alpha is listed, read and used by alpha's runs only: another
    project's callers do not see it, and a run of another project cannot name its path."""
    rows = [{"id": "1", "input": "q", "reference": "a"}]
    status, made, text = served.call(
        "editor-a", "/v1alpha1/datasets", {"name": "secret", "rows": rows, "projectId": "alpha"}
    )
    assert status == 200, text
    path = made["dataset"]["path"]
    listed = served.call("viewer-a", "/v1alpha1/datasets?projectId=alpha")[1]
    assert [d["name"] for d in listed["datasets"]] == ["secret"]
    for key, project in (("viewer-b", "beta"), ("editor-d", "")):
        query = f"?projectId={project}" if project else ""
        listed = served.call(key, f"/v1alpha1/datasets{query}")[1]
        assert "secret" not in [d["name"] for d in listed["datasets"]]
        status, answer, text = served.call(key, f"/v1alpha1/datasets/secret{query}")
        assert status == 404, text
        _errors_are_plain(status, answer, text)
    status, _, text = served.call("viewer-b", "/v1alpha1/datasets/secret?projectId=alpha",
                                  method="GET")  # fmt: skip
    assert status == 404, text
    spec = json.loads(json.dumps(SPEC).replace("d.jsonl", path))
    status, answer, text = served.call(
        "editor-b", "/v1alpha1/runs", {"run": spec, "projectId": "beta", "dryRun": True}
    )
    assert status == 400, text
    assert "no dataset" in answer["message"]
    status, _, text = served.call(
        "editor-a", "/v1alpha1/runs", {"run": spec, "projectId": "alpha", "dryRun": True}
    )
    assert status == 200, text


# -- excessive data exposure ----------------------------------------------------------------------
def test_refusals_say_nothing_of_what_exists_elsewhere(served: Served) -> None:
    """Another project's run, policy and project answer as ones that exist nowhere do."""
    status, made, text = served.call(
        "editor-b", "/v1alpha1/evaluate",
        {"records": RECORDS, "evaluators": [{"ref": "exact-match"}], "projectId": "beta"},
    )  # fmt: skip
    assert status == 200, text
    real, fake = made["runId"], "20990101-000000-deadbeefdead"
    pairs = [
        (f"/v1alpha1/runs/{real}?projectId=alpha", f"/v1alpha1/runs/{fake}?projectId=alpha"),
        ("/v1alpha1/runs?projectId=beta", "/v1alpha1/runs?projectId=zeta"),
        ("/v1alpha1/traces?projectId=beta", "/v1alpha1/traces?projectId=zeta"),
        ("/v1alpha1/projects/beta/apiKeys", "/v1alpha1/projects/zeta/apiKeys"),
        ("/v1alpha1/auditEvents?projectId=beta", "/v1alpha1/auditEvents?projectId=zeta"),
        # a page token naming another project's run is no token, as an unknown id is not
        (f"/v1alpha1/runs?pageToken={real}", f"/v1alpha1/runs?pageToken={fake}"),
        (f"/v1alpha1/runs?projectId=alpha&pageToken={real}",
         f"/v1alpha1/runs?projectId=alpha&pageToken={fake}"),
    ]  # fmt: skip
    for key in ("viewer-a", "admin-a"):
        for there, nowhere in pairs:
            a = served.call(key, there)
            b = served.call(key, nowhere)
            assert a[0] in (400, 403, 404), (key, there, a[2])
            _errors_are_plain(*a)
            shown = a[2].replace(real, "ID").replace("beta", "P")
            assert (a[0], shown) == (b[0], b[2].replace(fake, "ID").replace("zeta", "P")), there


def test_a_review_file_naming_a_prefix_tells_nothing_of_other_projects(tmp_path: Path) -> None:
    """ImportReview resolves the header's run in the caller's project: a prefix shared with
    another project's runs answers as one that is only the caller's (a server of its own:
    one ingest run in alpha)."""
    with _serve(tmp_path) as served:
        skipped = {"evaluator": "judge", "outcome": "OUTCOME_SKIPPED"}
        body = {"clientKey": "review-a", "projectId": "alpha", "evaluators": [{"name": "judge"}],
                "records": [{"record": {"id": "1", "output": {"text": "x"}},
                             "results": [skipped]}]}  # fmt: skip
        status, made, text = served.call(
            "editor-b", "/v1alpha1/ingest", {**body, "projectId": "beta"}
        )
        assert status == 200, text
        status, made, text = served.call("editor-a", "/v1alpha1/ingest", body)
        assert status == 200, text
        mine = made["run"]["id"]
        assert [r["id"] for r in served.runs_of("alpha")] == [mine]  # ing-: one run in alpha

        def imported(run_ref: str) -> tuple[int, str]:
            header = {"format": "evalsi-review", "version": 1, "run_id": run_ref}
            data = base64.b64encode(json.dumps(header).encode() + b"\n").decode()
            status, _, text = served.call(
                "editor-a", "/v1alpha1/reviews:import", {"projectId": "alpha", "file": data}
            )
            return status, text.replace(run_ref, "REF")

        shared = imported("ing-")  # alpha's one ingest run, and beta's too
        own = imported(mine[:-1])  # alpha's run only
        assert shared == own
        assert shared[0] == 400


def test_credentials_are_not_echoed_in_refusals(served: Served) -> None:
    jwks, key = served.idp
    wrong_key = "evk_" + "Z" * 43
    expired = token(key, jwks.url, sub="alice", exp=1_000_000_000)
    for credential, expected in (
        (wrong_key, 401),
        (SECRET["viewer-a"] + "x", 401),
        (expired, 401),
        (expired[:-8] + "AAAAAAAA", 401),
        (SECRET["viewer-a"], 403),  # may read, may not create runs
        (SECRET["ingest-a"], 403),
    ):
        status, answer, text = http(
            served.url + "/v1alpha1/runs", credential,
            body={"run": SPEC, "projectId": "alpha"}, method="POST",
        )  # fmt: skip
        assert status == expected, text
        _errors_are_plain(status, answer, text, credential, credential[4:], credential[-20:])
    status, answer, text = http(
        served.url + "/v1alpha1/runs", None, method="GET", authorization=SECRET["viewer-a"]
    )
    assert status == 401, text  # no "Bearer": the value is not read, nor shown
    _errors_are_plain(status, answer, text, SECRET["viewer-a"], SECRET["viewer-a"][4:])


def test_bad_input_errors_show_no_internals(served: Served) -> None:
    """Bad input is 400 or 404 naming the field, never the server's own paths or internals
    (what the caller sent may be named back to it)."""
    cases: list[tuple[str, str, str, Any, str]] = [
        ("viewer-a", "GET", "/v1alpha1/runs?projectId=alpha&pageSize=100000", None, ""),
        ("viewer-a", "GET", "/v1alpha1/runs?projectId=alpha&pageToken=%27%20OR%201%3D1--", None,
         "' OR 1=1--"),
        ("viewer-a", "GET", "/v1alpha1/runs/%00?projectId=alpha", None, ""),
        ("viewer-a", "GET", "/v1alpha1/runs/nope%27%3B%20DROP%20TABLE%20runs?projectId=alpha",
         None, "nope'; DROP TABLE runs"),
        ("viewer-a", "GET", "/v1alpha1/traces/zz?projectId=alpha", None, ""),
        ("admin-a", "GET", "/v1alpha1/auditEvents?pageToken=1%20OR%201", None, ""),
        ("editor-a", "POST", "/v1alpha1/reviews:import", {"projectId": "alpha", "file": "AAAA"},
         ""),
        ("editor-a", "POST", "/v1alpha1/runs", {"run": {"kind": 7}, "projectId": "alpha"}, ""),
    ]  # fmt: skip
    for where in ("../../../../etc/passwd", str(served.tmp / "s.db"), "nothing-here.jsonl"):
        run = json.loads(json.dumps(SPEC))
        run["spec"]["dataset"]["path"] = where
        cases.append(("editor-a", "POST", "/v1alpha1/runs", {"run": run, "projectId": "alpha"},
                      where))  # fmt: skip
    for key, method, path, body, sent in cases:
        status, answer, text = served.call(key, path, body, method)
        assert status in (400, 404), (path, text)
        _errors_are_plain(status, answer, text, sent=sent)
        assert str(served.tmp / "datasets") not in text, text  # the server's datasets_dir
