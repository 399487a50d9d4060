"""CI glue: the steps of the GitHub Action (``action.yml`` at the repository root).

``python -m evalsi.ci prepare|run|comment`` fetches the base branch's result store, runs the
eval into a copy of it, and posts one pull-request comment made by
``evalsi report RUN --format md --summary --compare BASELINE`` (docs/guides/ci.md).
"""

from evalsi.ci._action import COMMENT_LIMIT, OUTCOMES, Context, comment_body, main
from evalsi.ci._github import MARKER, Artifact, GitHub

__all__ = [
    "COMMENT_LIMIT",
    "MARKER",
    "OUTCOMES",
    "Artifact",
    "Context",
    "GitHub",
    "comment_body",
    "main",
]
