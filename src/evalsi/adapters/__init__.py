"""evalsi evaluators and other evaluation libraries, both ways: evalsi evaluators as Inspect
scorers (``inspect_scorer``) and MLflow GenAI scorers (``mlflow_scorer``); Inspect scorers as
evalsi evaluators (``from_inspect_scorer``), to serve from a plugin in their own venv
(docs/guides/adapters.md). Each library is imported on first use only."""

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.adapters._inspect import from_inspect_scorer, inspect_scorer
    from evalsi.adapters._mlflow import mlflow_scorer

__getattr__ = lazy_exports(__name__, __file__)

__all__ = ["from_inspect_scorer", "inspect_scorer", "mlflow_scorer"]
