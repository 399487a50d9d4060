"""A loopback GitHub REST API: a pull request's comments, and artifacts behind a redirect.

Just the calls the Action makes, answered the way api.github.com answers them (pages of 100,
``archive_download_url`` redirecting to blob storage). Every request is recorded with its
Authorization header, so a test can check where the token went.
"""

from __future__ import annotations

import io
import json
import threading
import urllib.parse
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    authorization: str | None
    body: Any = None


@dataclass
class StubGitHub:
    repository: str = "acme/bot"
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    blobs: dict[int, bytes] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    refuse_comments: int | None = None  # an HTTP status for every comment call
    _next_id: int = 1000

    def __enter__(self) -> StubGitHub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                stub._handle(self, "GET")

            def do_POST(self) -> None:
                stub._handle(self, "POST")

            def do_PATCH(self) -> None:
                stub._handle(self, "PATCH")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def add_artifact(
        self,
        name: str,
        branch: str,
        files: dict[str, bytes],
        created_at: str,
        expired: bool = False,
        fork: bool = False,
    ) -> int:
        """An artifact a workflow run on ``branch`` uploaded: a zip of ``files``."""
        self._next_id += 1
        ident = self._next_id
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for path, data in files.items():
                z.writestr(path, data)
        self.blobs[ident] = buf.getvalue()
        self.artifacts.append(
            {
                "id": ident,
                "name": name,
                "expired": expired,
                "created_at": created_at,
                "archive_download_url": f"{self.url}/repos/{self.repository}/actions/artifacts/"
                f"{ident}/zip",
                "workflow_run": {
                    "id": ident * 10,
                    "head_branch": branch,
                    "repository_id": 1,
                    "head_repository_id": 2 if fork else 1,  # a fork's pull request
                },
            }
        )
        return ident

    # -- the API ------------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parsed = urllib.parse.urlsplit(h.path)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        length = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(length)) if length else None
        self.calls.append(Call(method, parsed.path, query, h.headers.get("Authorization"), body))
        parts = parsed.path.strip("/").split("/")
        repo = "/".join(parts[1:3])
        if parts[0] == "blob":
            return self._send(h, 200, self.blobs[int(parts[1])], "application/zip")
        if parts[0] != "repos" or repo != self.repository:
            return self._json(h, 404, {"message": "Not Found"})
        rest = parts[3:]
        if rest[:1] == ["issues"] and self.refuse_comments:
            return self._json(h, self.refuse_comments, {"message": "Resource not accessible"})
        if rest[:1] == ["issues"] and len(rest) == 3 and rest[2] == "comments":
            comments = self.comments.setdefault(int(rest[1]), [])
            if method == "GET":
                return self._json(h, 200, _page(comments, query))
            self._next_id += 1
            comment = {
                "id": self._next_id,
                "body": body["body"],
                "html_url": f"https://github.test/{repo}/pull/{rest[1]}#c{self._next_id}",
            }
            comments.append(comment)
            return self._json(h, 201, comment)
        if rest[:2] == ["issues", "comments"] and method == "PATCH":
            for comments in self.comments.values():
                for comment in comments:
                    if comment["id"] == int(rest[2]):
                        comment["body"] = body["body"]
                        return self._json(h, 200, comment)
            return self._json(h, 404, {"message": "Not Found"})
        if rest == ["actions", "artifacts"]:
            named = [a for a in self.artifacts if a["name"] == query.get("name", a["name"])]
            newest = sorted(named, key=lambda a: a["created_at"], reverse=True)
            return self._json(
                h, 200, {"total_count": len(named), "artifacts": _page(newest, query)}
            )
        if rest[:2] == ["actions", "artifacts"] and rest[3:] == ["zip"]:
            h.send_response(302)  # GitHub hands out a short-lived blob-storage URL
            h.send_header("Location", f"{self.url}/blob/{rest[2]}")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        return self._json(h, 404, {"message": "Not Found"})

    def _json(self, h: BaseHTTPRequestHandler, status: int, value: Any) -> None:
        self._send(h, status, json.dumps(value).encode(), "application/json")

    def _send(self, h: BaseHTTPRequestHandler, status: int, data: bytes, kind: str) -> None:
        h.send_response(status)
        h.send_header("Content-Type", kind)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


def _page(items: list[dict[str, Any]], query: dict[str, str]) -> list[dict[str, Any]]:
    size = int(query.get("per_page", 30))
    page = int(query.get("page", 1))
    return items[(page - 1) * size : page * size]
