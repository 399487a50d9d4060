"""Evaluations as tests: the pytest plugin and its assertions (docs/guides/ci.md).

``pytest --evalsi`` (the plugin, ``evalsi.testing._plugin``, registered as the ``pytest11``
entry point ``evalsi``) gives tests the ``evalsi_eval`` fixture; ``assert_metric`` and
``assert_gates`` check a run's statistics with their intervals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalsi.testing._assertions import OPERATORS, assert_gates, assert_metric

__all__ = ["OPERATORS", "assert_gates", "assert_metric"]


def __getattr__(name: str) -> Any:
    # pytest imports this package for the plugin in every session: the assertions (and the
    # statistics under them) load when a test uses them
    if name not in __all__:
        raise AttributeError(f"module 'evalsi.testing' has no attribute {name!r}")
    from evalsi.testing import _assertions

    value = getattr(_assertions, name)
    globals()[name] = value
    return value
