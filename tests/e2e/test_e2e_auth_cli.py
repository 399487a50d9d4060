"""Identity from the command line, against a real ``evalsi serve --config`` and a real OpenID
Provider (``oidc-provider`` on Node.js): ``evalsi login`` by device code and by PKCE, the token
kept 0600 and renewed when it expires, ``whoami``, ``logout``; API keys created offline before
the first start, then over the API, listed, revoked; ``auth check``'s decision path; and a
simulated GitHub Actions job that runs a gated evaluation with its own OIDC token and no
stored secret."""

from __future__ import annotations

import json
import re
import socket
import stat
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import EVALSI, _env, check_user_error, write_jsonl
from tests.support.oidc_provider import OidcProvider, approve_authorization, approve_device

Cli = Callable[..., subprocess.CompletedProcess[str]]
GITHUB_AUDIENCE = "https://github.com/acme"
CI_CLAIMS = {
    "sub": "repo:acme/agent:ref:refs/heads/main",
    "repository": "acme/agent",
    "repository_owner": "acme",
    "ref": "refs/heads/main",
    "workflow": "eval",
    "event_name": "push",
    "run_id": "4242",
    "actor": "octocat",
    "aud": GITHUB_AUDIENCE,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(tmp: Path, corp: OidcProvider, github: OidcProvider) -> Path:
    doc = {
        "projects": ["checkout"],
        "auth": {
            "oidc": {
                "providers": [
                    {"name": "corp", "issuer": corp.issuer, "audience": "evalsi",
                     "jwks": "discovery", "allowInsecureJwks": True},
                    {"name": "github", "issuer": github.issuer, "audience": GITHUB_AUDIENCE,
                     "jwks": "discovery", "allowInsecureJwks": True,
                     "requiredClaims": ["repository", "ref"]},
                ]
            },
            "cliLogin": {"issuer": corp.issuer, "clientId": corp.client_id,
                         "audience": "evalsi"},
            "allowPlaintext": True,
        },
        "rbac": {"bindings": [
            {"role": "editor", "project": "default", "subjects": ["user:corp/alice"]},
        ]},
        "authorization": {"rules": [
            {"name": "github-main", "allow": 'jwt.iss == "' + github.issuer + '" && '
             'jwt.repository == "acme/agent" && jwt.ref == "refs/heads/main" && '
             'request.action in ["evaluations.run", "runs.read"] && '
             'resource.project == "checkout"'},
        ]},
    }  # fmt: skip
    path = tmp / "evalsi.yaml"
    path.write_text(json.dumps(doc))
    return path


class Served:
    def __init__(self, url: str, config: Path, admin_key: str, home: Path) -> None:
        self.url, self.config, self.admin_key, self.home = url, config, admin_key, home


@pytest.fixture(scope="module")
def corp() -> Iterator[OidcProvider]:
    with OidcProvider(audience="evalsi") as op:
        yield op


@pytest.fixture(scope="module")
def github() -> Iterator[OidcProvider]:
    with OidcProvider(audience=GITHUB_AUDIENCE) as op:
        yield op


def _run(cwd: Path, *args: Any, env: dict[str, str] | None = None, stdin: str | None = None,
         ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        [str(EVALSI), *map(str, args)], cwd=cwd, env=_env(cwd, env), input=stdin,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, corp: OidcProvider, github: OidcProvider
) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("auth-cli")
    config = _config(home, corp, github)
    # The first key, written into the store before the server starts (nobody can call it yet).
    boot = _run(home, "auth", "keys", "create", "--config", config, "--name", "boot",
                "--role", "admin", "--format", "json")  # fmt: skip
    assert boot.returncode == 0, boot.stderr
    assert "shown this once" in boot.stderr
    admin_key = json.loads(boot.stdout)["key"]
    assert admin_key.startswith("evk_")
    port = _free_port()
    proc = subprocess.Popen(
        [str(EVALSI), "serve", "--config", str(config), "--port", str(port)],
        cwd=home, env=_env(home, None), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/.well-known/evalsi-auth", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"evalsi serve did not start: {proc.communicate()}") from None
            time.sleep(0.2)
    try:
        yield Served(url, config, admin_key, home)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        for secret in (admin_key,):  # no key in the server's own output
            assert secret not in out + err


def _login(served: Served, cwd: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(EVALSI), "login", "--server", served.url, *extra], cwd=cwd, env=_env(cwd, None),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _read_until(proc: subprocess.Popen[str], pattern: str) -> re.Match[str]:
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            return found
    raise AssertionError(f"no {pattern!r} in the login's stderr: {''.join(seen)}")


def test_device_login_whoami_calls_and_logout(
    served: Served, corp: OidcProvider, tmp_path: Path
) -> None:
    login = _login(served, tmp_path)
    code = _read_until(login, r"enter the code (\S+)").group(1)
    approve_device(corp.issuer, code, "alice")
    _, err = login.communicate(timeout=60)
    assert login.returncode == 0, err
    assert "logged in to" in err
    assert "corp/alice" in err
    stored = tmp_path / ".config" / "evalsi" / "credentials"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600  # no keyring here: the private file

    me = _run(tmp_path, "whoami", "--server", served.url, "--format", "json")
    assert me.returncode == 0, me.stderr
    who = json.loads(me.stdout)
    assert (who["provider"], who["subject"], who["kind"]) == ("corp", "alice", "user")
    assert {"project": "default", "roles": ["editor"]} in who["roles"]
    # Any --server command now sends the kept token: alice may run evaluations.
    write_jsonl(tmp_path / "qa.jsonl", [{"id": "1", "output": "a", "reference": "a"}])
    graded = _run(tmp_path, "eval", "--data", "qa.jsonl", "--evaluators", "exact-match",
                  "--server", served.url, "--format", "json")  # fmt: skip
    assert graded.returncode == 0, graded.stderr
    run_id = json.loads(graded.stdout)["run_id"]
    shown = _run(tmp_path, "runs", "show", run_id, "--server", served.url, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["created_by"] == "corp/alice"
    assert _run(tmp_path, "logout", "--server", served.url).returncode == 0
    gone = _run(tmp_path, "whoami", "--server", served.url)
    assert gone.returncode != 0
    assert "evalsi login" in gone.stderr
    assert "Traceback" not in gone.stderr


def test_an_expired_login_is_renewed_with_the_refresh_token(
    served: Served, corp: OidcProvider, tmp_path: Path
) -> None:
    login = _login(served, tmp_path)
    approve_device(corp.issuer, _read_until(login, r"enter the code (\S+)").group(1), "alice")
    login.communicate(timeout=60)
    assert login.returncode == 0
    stored = tmp_path / ".config" / "evalsi" / "credentials"
    document = json.loads(stored.read_text())
    (entry,) = document["servers"].values()
    old_access = entry["access_token"]
    entry["expires_at"] = time.time() - 10  # as if an hour went by
    stored.write_text(json.dumps(document))
    me = _run(tmp_path, "whoami", "--server", served.url, "--format", "json")
    assert me.returncode == 0, me.stderr
    assert json.loads(me.stdout)["subject"] == "alice"
    (renewed,) = json.loads(stored.read_text())["servers"].values()
    assert renewed["access_token"] != old_access
    assert renewed["expires_at"] > time.time() + 60
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600


def test_browser_login_with_pkce(served: Served, corp: OidcProvider, tmp_path: Path) -> None:
    login = _login(served, tmp_path, "--browser", "--no-open")
    authorize = _read_until(login, r"Sign in at (\S+)").group(1)
    back_to = approve_authorization(authorize, "alice")
    assert back_to.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(back_to, timeout=10) as answer:  # the browser comes back
        assert answer.status == 200
    _, err = login.communicate(timeout=60)
    assert login.returncode == 0, err
    assert "corp/alice" in err


def test_login_to_a_server_without_cli_login_says_what_to_do(tmp_path: Path) -> None:
    with _PlainServer() as url:
        proc = _run(tmp_path, "login", "--server", url)
    check_user_error(proc, "auth.cliLogin", "--issuer")


def test_api_keys_from_the_cli(served: Served, tmp_path: Path) -> None:
    admin = {"EVALSI_API_KEY": served.admin_key}
    made = _run(tmp_path, "auth", "keys", "create", "--name", "ci", "--role", "runner",
                "--expires", "30d", "--label", "team=shop",
                "--server", served.url, env=admin)  # fmt: skip
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert re.fullmatch(r"evk_[0-9A-Za-z]{43}", key)
    listed = _run(tmp_path, "auth", "keys", "list", "--server", served.url, "--format", "json",
                  env=admin)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    rows = {k["name"]: k for k in json.loads(listed.stdout)}
    assert rows["ci"]["prefix"] == key[: len(rows["ci"]["prefix"])]
    assert key not in listed.stdout  # the key itself was shown once
    assert rows["ci"]["labels"] == {"team": "shop"}
    # The new key works, and a runner may not make keys (nor an owner key, even the admin).
    me = _run(tmp_path, "whoami", "--server", served.url, "--format", "json",
              env={"EVALSI_API_KEY": key})  # fmt: skip
    assert json.loads(me.stdout)["kind"] == "apikey"
    escalate = _run(tmp_path, "auth", "keys", "create", "--name", "root", "--role", "owner",
                    "--server", served.url, env=admin)  # fmt: skip
    assert escalate.returncode != 0
    assert "owner" in escalate.stderr
    assert "Traceback" not in escalate.stderr
    revoked = _run(tmp_path, "auth", "keys", "revoke", rows["ci"]["id"], "--server",
                   served.url, env=admin)  # fmt: skip
    assert revoked.returncode == 0, revoked.stderr
    after = _run(tmp_path, "whoami", "--server", served.url, env={"EVALSI_API_KEY": key})
    assert after.returncode != 0
    assert "Traceback" not in after.stderr
    audit = _run(tmp_path, "auth", "audit", "--project", "default", "--server", served.url,
                 "--format", "json", env=admin)  # fmt: skip
    assert audit.returncode == 0, audit.stderr
    whats = [(e["decision"], e["resource"]) for e in json.loads(audit.stdout)]
    assert ("allow", f"key {rows['ci']['id']}") in whats
    assert ("deny", "role owner") in whats
    assert key not in audit.stdout
    assert served.admin_key not in audit.stdout


def test_keys_hash_matches_what_the_server_accepts(tmp_path: Path) -> None:
    made = _run(tmp_path, "auth", "keys", "hash", "--generate", "--format", "json")
    pair = json.loads(made.stdout)
    again = _run(tmp_path, "auth", "keys", "hash", stdin=pair["key"] + "\n")
    assert again.stdout.strip() == pair["hash"]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", pair["hash"])
    check_user_error(_run(tmp_path, "auth", "keys", "hash", stdin=""), "no key")


def test_auth_check_prints_the_decision_path(
    served: Served, github: OidcProvider, tmp_path: Path
) -> None:
    alice = json.dumps({"provider": "corp", "subject": "alice"})
    base = ("auth", "check", "--config", served.config)
    allowed = _run(tmp_path, *base, "--action", "runs.create", "--principal", alice)
    assert allowed.returncode == 0, allowed.stderr
    assert "role editor (binding user:corp/alice in default)" in allowed.stdout
    assert "decision: allow" in allowed.stdout
    denied = _run(tmp_path, *base, "--action", "access.manage", "--principal", alice,
                  "--format", "json")  # fmt: skip
    assert denied.returncode == 1
    verdict = json.loads(denied.stdout)
    assert verdict["allowed"] is False
    assert verdict["decided_by"] == "default deny"
    assert (
        "role editor (binding user:corp/alice in default): does not grant access.manage"
        in (verdict["path"])
    )
    token = github.mint(CI_CLAIMS)
    ci = _run(tmp_path, *base, "--project", "checkout", "--action", "evaluations.run",
              "--credential-stdin",
              stdin=token + "\n")  # fmt: skip
    assert ci.returncode == 0, ci.stderr
    assert "allow rule github-main: matches" in ci.stdout
    check_user_error(_run(tmp_path, *base, "--action", "runs.create", "--principal", "[1]"),
                     "--principal")  # fmt: skip
    check_user_error(
        _run(tmp_path, *base, "--action", "runs.create", "--credential-stdin", stdin="evk_no\n"),
        "refuse",
    )


def test_a_github_actions_job_runs_a_gated_evaluation_with_its_own_token(
    served: Served, github: OidcProvider, tmp_path: Path
) -> None:
    """No stored secret: the job's OIDC token (a loopback issuer with GitHub's claims and
    discovery document) is allowed by a rule on jwt.iss / jwt.repository / jwt.ref."""
    write_jsonl(tmp_path / "qa.jsonl", [
        {"id": str(i), "output": "Paris", "reference": "Paris" if i % 5 else "Lyon"}
        for i in range(20)
    ])  # fmt: skip
    job = {"EVALSI_TOKEN": github.mint(CI_CLAIMS), "EVALSI_SERVER": served.url,
           "EVALSI_PROJECT": "checkout"}  # fmt: skip
    args = ("eval", "--data", "qa.jsonl", "--evaluators", "exact-match", "--format", "json")
    passed = _run(tmp_path, *args, "--gate", "metric('exact-match').mean >= 0.7", env=job)
    assert passed.returncode == 0, passed.stderr
    result = json.loads(passed.stdout)
    assert result["metrics"][0]["mean"] == pytest.approx(0.8)
    failed = _run(tmp_path, *args, "--gate", "metric('exact-match').mean >= 0.9", env=job)
    assert failed.returncode == 1  # the gate decides, as for a local run
    shown = _run(tmp_path, "runs", "show", result["run_id"], "--format", "json", env=job)
    assert json.loads(shown.stdout)["created_by"] == ("github/repo:acme/agent:ref:refs/heads/main")
    # A fork's job, a branch, and the job's token kept past its lifetime are all refused.
    fork = {**job, "EVALSI_TOKEN": github.mint({**CI_CLAIMS, "repository": "evil/agent"})}
    branch = {**job, "EVALSI_TOKEN": github.mint({**CI_CLAIMS, "ref": "refs/heads/x"})}
    expired = {**job, "EVALSI_TOKEN": github.mint({**CI_CLAIMS, "exp": int(time.time()) - 600,
                                                   "iat": int(time.time()) - 900,
                                                   "nbf": int(time.time()) - 900})}  # fmt: skip
    # A job the rule does not allow holds no role in the project: it is not found (404).
    for env, why in ((fork, "no project"), (branch, "no project"), (expired, "expired")):
        refused = _run(tmp_path, *args, env=env)
        assert refused.returncode not in (0, 1), refused.stdout
        assert "Traceback" not in refused.stderr
        assert why in refused.stderr.lower(), refused.stderr
    # The job may not do what the rule does not name (no role of its own).
    other = _run(tmp_path, "auth", "keys", "list", env=job)
    assert other.returncode != 0


class _PlainServer:
    """A loopback HTTP server answering /.well-known/evalsi-auth with no issuer."""

    def __enter__(self) -> str:
        import http.server

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = b'{"issuer": "", "client_id": "", "audience": ""}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
