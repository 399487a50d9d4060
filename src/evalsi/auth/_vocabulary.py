"""What authorization CEL may name: the variables of rules, role conditions and ``cel:``
binding subjects, and the made-up requests they are dry-run on when the config loads.

Variables: ``jwt`` (the verified claims, empty for a key), ``apiKey`` (the key's name and
labels, never the key), ``principal``, ``request`` (method, action, protocol, headers without
credentials), ``resource`` (``project``, ``labels`` and the attributes of the action) and
``source`` (``address``).
"""

from __future__ import annotations

from typing import Any

from evalsi.core import Vocabulary

VARIABLES = ("jwt", "apiKey", "principal", "request", "resource", "source")


def _samples() -> tuple[dict[str, Any], ...]:
    principal = {
        "kind": "user", "provider": "corp", "subject": "alice", "id": "corp/alice",
        "name": "Alice", "email": "alice@example.com", "groups": ["eng"], "roles": ["viewer"],
        "labels": {},
    }  # fmt: skip
    resource = {
        "project": "default", "labels": {"app": "checkout"}, "runs_code": False,
        "target": {"connector": "openai", "model": "m"}, "judge": {"model": "j"},
        "evaluators": ["exact-match"], "dataset": "d.jsonl", "trials": 1,
        "run": {"id": "r", "name": "n", "created_by": "corp/alice", "labels": {}},
        "policy": {"name": "p"}, "service": "svc", "role": "viewer", "key": {"name": "k"},
    }  # fmt: skip
    request = {"method": "/evalsi.v1alpha1.RunService/CreateRun", "action": "runs.create",
               "protocol": "connect", "headers": {}}  # fmt: skip
    jwt = {"iss": "https://issuer", "sub": "alice", "aud": "evalsi", "exp": 0,
           "repository": "acme/agent", "ref": "refs/heads/main"}  # fmt: skip
    base = {"principal": principal, "resource": resource, "request": request,
            "source": {"address": "127.0.0.1"}}  # fmt: skip
    key = {"name": "ci", "labels": {}}
    return ({**base, "jwt": jwt, "apiKey": {}}, {**base, "jwt": {}, "apiKey": key})


VOCABULARY = Vocabulary(VARIABLES, _samples(), {})
