"""Where runs and results live: SQLite embedded by default, PostgreSQL later, one schema."""

from evalsi.store._sql import RunInfo, SqlStore, new_run_id
from evalsi.store._writer import BackgroundWriter

DEFAULT_STORE = ".evalsi/evalsi.db"

__all__ = ["DEFAULT_STORE", "BackgroundWriter", "RunInfo", "SqlStore", "new_run_id"]
