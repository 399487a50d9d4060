"""The error hierarchy.

``UserError`` means the input or configuration is wrong: the CLI prints its message (and hint)
without a traceback and exits 2. ``RunError`` means work could not finish (infrastructure): exit 3.
A failure on one record is never an exception; it is an ``ERROR`` result on the run.
"""

from __future__ import annotations


class EvalsiError(Exception):
    """Root of every error evalsi raises on purpose."""

    exit_code = 3

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UserError(EvalsiError):
    """Bad input or configuration; fixable by the user."""

    exit_code = 2


class DatasetError(UserError):
    """A dataset cannot be read: the message names the file and, where known, the line."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        where = path or "<data>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}", hint=hint)
        self.path = path
        self.line = line


class NotFoundError(UserError):
    """A run, dataset or other named object that does not exist (HTTP 404 on the server)."""


class UnknownEvaluatorError(UserError):
    """An evaluator reference that no registry entry matches."""


class ParamError(UserError):
    """An evaluator parameter that is unknown or has the wrong type or value."""


class SpecError(UserError):
    """A spec file (YAML) that does not validate."""


class RunError(EvalsiError):
    """Work could not finish because of infrastructure (store, network, sandbox)."""


class StoreError(RunError):
    """The result store cannot be opened or written."""
