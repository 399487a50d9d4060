"""The few GitHub REST calls the Action makes: a pull request's comments, and artifacts.

Plain ``urllib`` (the Action runs right after ``pip install evalsi``; nothing else to install).
``GITHUB_API_URL`` is where the API lives, as GitHub sets it (GitHub Enterprise included), so a
test points it at a loopback stub.
"""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from evalsi.core import RunError, UserError

MARKER = "<!-- evalsi -->"
_PAGE = 100
_TIMEOUT = 30.0
# A base branch pushed to all day keeps one store artifact per push: the newest few pages hold
# the one wanted; older ones are not worth the calls.
_ARTIFACT_PAGES = 5


@dataclass(frozen=True, slots=True)
class Artifact:
    id: int
    name: str
    branch: str
    created_at: str
    download_url: str


class GitHub:
    """One repository's REST API, with the job's token."""

    def __init__(self, api_url: str, repository: str, token: str) -> None:
        if repository.count("/") != 1:
            raise UserError(
                f"GITHUB_REPOSITORY is {repository!r}, not OWNER/NAME",
                hint="run the action inside a GitHub Actions job",
            )
        if not token:
            raise UserError(
                "no GitHub token: the action needs one to comment and to fetch the baseline",
                hint="pass `github-token: ${{ github.token }}` (the default) and grant "
                "`permissions: {pull-requests: write, actions: read}`",
            )
        self.api = api_url.rstrip("/")
        self.repository = repository
        self.token = token

    # -- comments -----------------------------------------------------------------------------
    def find_comment(self, issue: int, marker: str = MARKER) -> dict[str, Any] | None:
        """The first comment on the pull request whose body holds ``marker``."""
        for page in self._pages(f"/repos/{self.repository}/issues/{issue}/comments", {}):
            for comment in page:
                if marker in str(comment.get("body") or ""):
                    return dict(comment)
        return None

    def upsert_comment(self, issue: int, body: str, marker: str = MARKER) -> dict[str, Any]:
        """Update the comment that holds ``marker``, or post one: a pull request keeps ONE
        evalsi comment however often it is pushed to."""
        found = self.find_comment(issue, marker)
        if found is not None:
            path = f"/repos/{self.repository}/issues/comments/{found['id']}"
            return self._json("PATCH", path, {"body": body})
        return self._json(
            "POST", f"/repos/{self.repository}/issues/{issue}/comments", {"body": body}
        )

    # -- artifacts ----------------------------------------------------------------------------
    def newest_artifact(self, name: str, branch: str) -> Artifact | None:
        """The newest unexpired artifact ``name`` that a workflow run on ``branch`` uploaded."""
        path = f"/repos/{self.repository}/actions/artifacts"
        query = {"name": name}
        best: Artifact | None = None
        for number, page in enumerate(self._pages(path, query, key="artifacts")):
            for a in page:
                run = a.get("workflow_run") or {}
                if a.get("expired") or a.get("name") != name or run.get("head_branch") != branch:
                    continue
                # a fork's pull request runs here too, and its branch may be called main: only
                # a run of this repository's own branch is a baseline
                if run.get("head_repository_id") != run.get("repository_id"):
                    continue
                found = Artifact(
                    id=int(a["id"]),
                    name=name,
                    branch=branch,
                    created_at=str(a.get("created_at") or ""),
                    download_url=str(a["archive_download_url"]),
                )
                if best is None or found.created_at > best.created_at:
                    best = found
            if best is not None or number + 1 >= _ARTIFACT_PAGES:
                break
        return best

    def download_file(self, artifact: Artifact, suffix: str) -> bytes:
        """The one file ending in ``suffix`` in the artifact's zip (its bytes; nothing is
        extracted, so names in the zip never become paths here)."""
        data = self._request("GET", artifact.download_url)
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                names = [n for n in z.namelist() if n.endswith(suffix) and not n.endswith("/")]
                if len(names) != 1:
                    raise UserError(
                        f"artifact {artifact.name!r} (id {artifact.id}) holds {len(names)} "
                        f"files ending in {suffix}, not one: {sorted(z.namelist())[:10]}",
                        hint="upload the result store alone, e.g. path: .evalsi/evalsi.db",
                    )
                return z.read(names[0])
        except zipfile.BadZipFile as e:
            raise RunError(f"artifact {artifact.name!r} (id {artifact.id}) is not a zip") from e

    # -- plumbing -----------------------------------------------------------------------------
    def _pages(
        self, path: str, query: Mapping[str, str], key: str | None = None
    ) -> Iterator[list[dict[str, Any]]]:
        for page in range(1, 1000):
            params = urllib.parse.urlencode({**query, "per_page": _PAGE, "page": page})
            got = json.loads(self._request("GET", f"{self.api}{path}?{params}"))
            items = got.get(key, []) if key and isinstance(got, dict) else got
            if not isinstance(items, list):
                raise RunError(f"GitHub answered GET {path} with {type(items).__name__}")
            yield items
            if len(items) < _PAGE:
                return

    def _json(self, method: str, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        answer = json.loads(self._request(method, self.api + path, body))
        return dict(answer) if isinstance(answer, dict) else {}

    def _request(self, method: str, url: str, body: Mapping[str, Any] | None = None) -> bytes:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/vnd.github+json")
        req.add_header("X-GitHub-Api-Version", "2022-11-28")
        req.add_header("User-Agent", "evalsi-action")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        # unredirected: an artifact download redirects to blob storage, which must not see it
        req.add_unredirected_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=_TIMEOUT) as resp:
                return bytes(resp.read())
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:300]
            where = url.split("?", 1)[0]
            hint = None
            if e.code in (401, 403, 404):
                hint = (
                    "the job's token needs `permissions: {pull-requests: write, actions: read}`; "
                    "a pull request from a fork gets a read-only token"
                )
            raise RunError(f"GitHub answered {method} {where}: {e.code} {detail}", hint=hint) from e
        except (urllib.error.URLError, TimeoutError) as e:
            raise RunError(f"cannot reach GitHub at {self.api}: {e}") from e
