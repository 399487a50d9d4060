"""Audit retention: the audit thread deletes events older than ``auth.auditRetention`` when it
starts and then at most once an hour; a failed deletion is logged and retried; a server whose
configuration keeps events forever, or has no authentication, deletes nothing."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from evalsi.auth import Access, AuditEvent, AuthSettings
from evalsi.auth._audit import EXPIRE_EVERY_S, AuditLog
from evalsi.server import load_config
from evalsi.store import SqlStore, read_audit, write_audit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_retention_runs_at_the_first_round_then_at_most_once_an_hour() -> None:
    clock, calls = Clock(), []

    def expire() -> int:
        calls.append(clock.now)
        return 3

    log = AuditLog(lambda rows: None, expire=expire, monotonic=clock)
    assert log.expire_due() == 3
    clock.now += EXPIRE_EVERY_S - 1
    assert log.expire_due() == 0
    clock.now += 1
    assert log.expire_due() == 3
    assert calls == [1000.0, 1000.0 + EXPIRE_EVERY_S]


def test_a_failed_deletion_is_logged_and_retried_an_interval_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, outcomes = Clock(), iter([RuntimeError("database is locked"), 5])

    def expire() -> int:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        assert isinstance(outcome, int)
        return outcome

    log = AuditLog(lambda rows: None, expire=expire, monotonic=clock)
    with caplog.at_level(logging.INFO, "evalsi.auth"):
        assert log.expire_due() == 0
        assert log.expire_due() == 0  # not again at once
        clock.now += EXPIRE_EVERY_S
        assert log.expire_due() == 5
    assert "could not delete expired events" in caplog.text
    assert "deleted 5 expired events" in caplog.text


def test_without_retention_nothing_is_expired() -> None:
    log = AuditLog(lambda rows: None)
    assert log.expire_due() == 0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    db = SqlStore.open(tmp_path / "s.db")
    yield db
    db.close()


def _events(store: SqlStore, now: float) -> None:
    write_audit(
        store,
        [
            AuditEvent("apikey/a", "runs.create", "p", "run x", "allow", "role runner",
                       time=now - age).row()
            for age in (10.0, 3 * 86400.0, 40 * 86400.0)
        ],
    )  # fmt: skip


def _ages(store: SqlStore, now: float) -> list[float]:
    return sorted(round(now - r["time"]) for r in read_audit(store, None, limit=1000))


def _wait_for(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_an_access_with_a_store_deletes_what_its_retention_ends_when_it_starts(
    store: SqlStore,
) -> None:
    now = time.time()
    _events(store, now)
    access = Access(AuthSettings(enabled=True, audit_retention_s=86400.0), store)
    try:
        _wait_for("the old events to go", lambda: _ages(store, now) == [10])
    finally:
        access.close()


def test_retention_from_evalsi_yaml(tmp_path: Path, store: SqlStore) -> None:
    path = tmp_path / "evalsi.yaml"
    path.write_text("auth:\n  auditRetention: 7d\n  allowPlaintext: true\n  apiKeys: {keys: []}\n")
    settings = load_config(path).auth
    assert settings.audit_retention_s == 7 * 86400.0
    now = time.time()
    _events(store, now)
    access = Access(settings, store)
    try:
        _wait_for("the 40-day-old event to go", lambda: _ages(store, now) == [10, 3 * 86400])
    finally:
        access.close()


@pytest.mark.parametrize("settings", [
    AuthSettings(enabled=True, audit_retention_s=None),  # auditRetention: never
    AuthSettings(enabled=False, audit_retention_s=1.0),  # no authentication: no audit log
])  # fmt: skip
def test_never_or_off_deletes_nothing(store: SqlStore, settings: AuthSettings) -> None:
    now = time.time()
    _events(store, now)
    access = Access(settings, store)
    access.record(AuditEvent("apikey/a", "runs.read", "p", "", "deny", "default deny"))
    access.close()  # joins the audit thread, having flushed what was queued
    assert access.audit.expire_due() == 0
    assert len(_ages(store, now)) == 3 + int(settings.enabled)
