"""The policy engine's upkeep (``Upkeep``, mixed into ``PolicyEngine``): alerts checked every
second and after each graded trace, and each policy's counts and alert states kept in the
store every ``PERSIST_EVERY_S``. With server replicas only the leader (the ``watch`` lease
holder, decision 0019) does either: the others' windows are empty and their counts are the
leader's, taken from the store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from evalsi.policies._alerts import AlertState, Notifier
from evalsi.policies._cel import ConditionError, evaluate
from evalsi.policies._live import LivePolicy
from evalsi.policies._store import PolicyRuns

log = logging.getLogger("evalsi.policies")

ALERT_CHECK_S = 1.0
"""How often alerts are checked besides after each graded trace."""
PERSIST_EVERY_S = 10.0
"""How often each policy's counts and alert states are kept in the store (and at close)."""


class Upkeep:
    """Alerts and kept counts of the applied policies (the engine's own state, typed here)."""

    _policies: dict[tuple[str, str], LivePolicy]
    _tasks: set[asyncio.Task[None]]
    _saving: asyncio.Task[None] | None
    runs: PolicyRuns | None
    notifier: Notifier
    clock: Any
    leader: bool

    async def _tick(self) -> None:
        """Every second, the alerts (checked after each graded trace too: a window emptying,
        traffic stopped, makes an alert true with no trace arriving); every
        ``PERSIST_EVERY_S``, each policy's counts and alert states, kept with its run."""
        saved_at = time.monotonic()
        while True:
            await asyncio.sleep(ALERT_CHECK_S)
            if not self.leader:  # another replica grades: its windows, its alerts
                continue
            for live in list(self._policies.values()):
                try:
                    await live.refresh_corpora()
                    self._check_alerts_if_warm(live)
                except Exception:  # must not stop the loop for the other policies
                    log.exception("policy %s: checking its alerts failed", live.spec.name)
            if time.monotonic() - saved_at >= PERSIST_EVERY_S and (
                self._saving is None or self._saving.done()
            ):  # beside the checks: a slow store must not hold the alerts up
                saved_at = time.monotonic()
                self._saving = asyncio.create_task(self._persist(), name="evalsi-policy-save")

    async def _persist(self) -> None:
        """Keep what changed of each policy's counts and alert states in the store."""
        if self.runs is None or not self.leader:
            return
        for key, live in list(self._policies.items()):
            if self._policies.get(key) is not live:
                continue  # deleted or replaced meanwhile: its run is ended
            state = live.state(time.time())  # both clocks read together
            mark = (state["counts"], {n: (a.firing, a.fired) for n, a in live.alert_states.items()})
            if mark == live.saved:
                continue
            try:
                await self.runs.save_state(live.run_id, state)
                live.saved = mark
            except Exception:  # the next round tries again
                log.exception("policy %s: cannot keep its counts", live.spec.name)

    def _check_alerts_if_warm(self, live: LivePolicy) -> None:
        """Alerts checked with no trace graded: only once the policy has been applied for a
        whole window, or a window that is empty because the server just started (not because
        traffic stopped) would fire ``n < 100``."""
        if self.clock() - live.started >= live.spec.window_s:
            self._check_alerts(live)

    def _check_alerts(self, live: LivePolicy) -> None:
        if not live.spec.alerts:
            return
        functions = live.window.functions()
        variables = {"n": live.window.n}
        now = self.clock()
        for alert in live.spec.alerts:
            assert alert.program is not None
            try:
                holds = evaluate(alert.program, variables, functions)
            except ConditionError:
                holds = False  # not decidable on this window (no data yet): not true
            state = live.alert_states.setdefault(alert.name, AlertState())
            if state.update(holds, now, alert.cooldown_s):
                live.counts.alerts_fired += 1
                payload = live.alert_payload(alert.name, alert.when)
                task = asyncio.create_task(self._deliver(live, alert.notify, payload))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _deliver(self, live: LivePolicy, url: str, payload: dict[str, Any]) -> None:
        try:
            delivered = await self.notifier.send(url, payload)
        except Exception:
            log.exception("policy %s: alert delivery failed", live.spec.name)
            delivered = False
        if not delivered:
            live.counts.alert_failures += 1
