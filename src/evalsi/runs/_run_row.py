"""``RunRow``: a run's store and its stored row, made when first needed, and its end recorded.

Every way in stores its run through one of these. Opening the store imports SQLAlchemy and
checks the schema, which takes longer than grading a first batch or sending a first target
call; a run that needs neither a judge cache nor a resume opens it at its first write, so its
first record or call does not wait (issue 16, start-up). A run stopped before then is still
created, and recorded as failed, interrupted or cancelled.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from evalsi.core import EvalsiError, ResultBatch, RunStatus, UserError
from evalsi.store import DEFAULT_STORE  # a plain constant: no SQLAlchemy yet

if TYPE_CHECKING:
    from evalsi.store import SqlStore

StoreLike: TypeAlias = "SqlStore | str | os.PathLike[str] | None"


def open_store(store: StoreLike, *, create: bool = True) -> SqlStore:
    """``None`` means the embedded default, ``.evalsi/evalsi.db`` under the working directory.

    With ``create=False`` (reading commands) a SQLite file that does not exist is an error
    instead of a new empty store.
    """
    from evalsi.store import SqlStore

    if isinstance(store, SqlStore):
        return store
    location = store if store is not None else Path.cwd() / DEFAULT_STORE
    text = str(location)
    if not create and "://" not in text and text != ":memory:" and not Path(text).exists():
        raise UserError(
            f"no result store at {text}",
            hint="runs are stored by `evalsi eval`; pass --store PATH to read another store",
        )
    return SqlStore.open(location)


class RunRow:
    """The store and one run's row in it, created on the first ``open()``."""

    def __init__(
        self,
        where: StoreLike,
        *,
        kind: str,
        spec: dict[str, Any],
        name: str = "",
        run_id: str | None = None,
        project_id: str | None = None,
        created_by: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.where = where
        self.clock = clock  # unix seconds: when the run was created and ended
        self.kind = kind
        self.spec = spec
        self.name = name
        self.project_id = project_id
        self.created_by = created_by  # the principal that started the run (provider/subject)
        self.refused = False  # opening the store or creating the run failed: nothing to record
        self._db: SqlStore | None = None
        self._run_id = run_id
        self._created = False

    def store(self) -> SqlStore:
        """The store, opened on the first call."""
        if self._db is None:
            try:
                self._db = open_store(self.where)
            except BaseException:
                self.refused = True
                raise
        return self._db

    def adopt(self, run_id: str) -> None:
        """Use the stored run ``run_id`` (a resumed run) instead of creating one."""
        self.store()
        self._run_id, self._created = run_id, True

    def open(self) -> tuple[SqlStore, str]:
        """The store and the run's id; the run is created on the first call."""
        db = self.store()
        if not self._created:
            try:
                project = {} if self.project_id is None else {"project_id": self.project_id}
                self._run_id = db.create_run(
                    kind=self.kind,
                    spec=self.spec,
                    name=self.name,
                    run_id=self._run_id,
                    at=self.clock(),
                    created_by=self.created_by,
                    **project,
                ).id
            except BaseException:
                self.refused = True
                raise
            self._created = True
        assert self._run_id is not None
        return db, self._run_id

    @property
    def run_id(self) -> str:
        """The run's id once created ("" before)."""
        return (self._run_id or "") if self._created else ""

    def save(
        self,
        status: RunStatus,
        *,
        records: int,
        summary: dict[str, Any] | None,
        manifest: dict[str, Any] | None,
        batches: Sequence[tuple[int, int, ResultBatch]] = (),
        error: str | None = None,
    ) -> str:
        """Store the run, over already, with its results in one transaction (a one-message
        Evaluate: all of it or nothing); its id."""
        project = {} if self.project_id is None else {"project_id": self.project_id}
        self._run_id = self.store().save_run(
            kind=self.kind,
            spec=self.spec,
            name=self.name,
            run_id=self._run_id,
            status=status,
            records=records,
            summary=summary,
            manifest=manifest,
            batches=batches,
            error=error,
            at=self.clock(),
            created_by=self.created_by,
            **project,
        )
        self._created = True
        return self._run_id

    def fail(
        self,
        error: BaseException,
        *,
        records: int,
        on_request: bool = False,
        detail: bool = True,
    ) -> RunStatus:
        """Record that ``error`` stopped the run (stored at once if it was not yet); returns
        the status given: interrupted, cancelled or failed. Without ``detail`` (a server's
        run, read by other clients) an unexpected error is named by its type only."""
        status = RunStatus.of_exception(error, on_request=on_request)
        if self.refused:
            return status
        message = (
            str(error)
            if isinstance(error, EvalsiError)
            else f"{type(error).__name__}: {error}"
            if detail
            else type(error).__name__
        )
        if status is RunStatus.CANCELLED:
            message = "cancelled on request"
        if self._created:
            self.finish(status, records=records, summary=None, manifest=None, error=message)
        else:
            self.save(status, records=records, summary=None, manifest=None, error=message)
        return status

    def finish(
        self,
        status: RunStatus,
        *,
        records: int,
        summary: dict[str, Any] | None,
        manifest: dict[str, Any] | None,
        error: str | None = None,
    ) -> None:
        """Record the run's end (creating the run if it was not yet)."""
        db, run_id = self.open()
        db.finish_run(
            run_id,
            status=status,
            records=records,
            summary=summary,
            manifest=manifest,
            error=error,
            at=self.clock(),
        )
