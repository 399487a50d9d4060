"""Optional dependencies: a missing extra is a user's fix (an install hint), never a traceback.

The core install grades, runs, reports and talks to a server; the server itself, PostgreSQL,
Parquet, charts, the text/safety model packs and the sandbox's seccomp filter each live behind a
pip extra (pyproject.toml). ``require_extra`` is called where such a feature starts, so the
user hears which extra to install before any work; ``missing_extra`` maps any
``ModuleNotFoundError`` that still escapes (an import deep in a library) to the same hint, which
the CLI prints (exit 2).
"""

from __future__ import annotations

import importlib.util

from evalsi.core._errors import UserError

EXTRA_OF: dict[str, str] = {
    # evalsi serve (and Watch's OTLP ingest on it)
    "starlette": "server",
    "hypercorn": "server",
    "prometheus_client": "server",
    "grpc": "server",
    "opentelemetry": "server",
    "psycopg": "postgres",
    "pyarrow": "parquet",
    "matplotlib": "reports",
    "sacrebleu": "text",
    "rouge_score": "text",
    "nltk": "text",
    "bert_score": "text-models",
    "sentence_transformers": "text-models",
    "presidio_analyzer": "presidio",
    "transformers": "toxicity",
    "torch": "toxicity",
    "pyseccomp": "sandbox",
    "mcp": "agents",
    "mcp_types": "agents",
    "a2a": "a2a",
    "inspect_ai": "inspect",
    "mlflow": "mlflow",
    "boto3": "s3",
    "botocore": "s3",
    "wandb": "wandb",
    "langfuse": "langfuse",
    "langsmith": "langsmith",
}
"""Top-level module -> the extra that installs it."""


class MissingExtraError(UserError):
    """A feature whose optional dependencies are not installed (exit 2, with the pip command)."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(
            f"{feature} needs the '{extra}' extra ({module} is not installed)",
            hint=f"pip install 'evalsi[{extra}]'",
        )
        self.feature = feature
        self.extra = extra
        self.module = module


def require_extra(feature: str, extra: str, *modules: str) -> None:
    """Raise ``MissingExtraError`` unless every module in ``modules`` can be imported.

    Only looks (``find_spec``), never imports, so a feature checks before its slow imports.

    Example:
        >>> require_extra("evalsi eval", "core", "json")  # present: nothing happens
        >>> try:
        ...     require_extra("charts", "reports", "no_such_module_here")
        ... except MissingExtraError as e:
        ...     print(e.hint)
        pip install 'evalsi[reports]'
    """
    for module in modules:
        if not _importable(module):
            raise MissingExtraError(feature, extra, module.partition(".")[0])


def missing_extra(
    error: ModuleNotFoundError, feature: str = "this command"
) -> MissingExtraError | None:
    """The install hint for a ``ModuleNotFoundError`` of an optional package, else ``None``."""
    top = (error.name or "").partition(".")[0]
    extra = EXTRA_OF.get(top)
    return MissingExtraError(feature, extra, top) if extra else None


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package, or a half-installed one
        return False
