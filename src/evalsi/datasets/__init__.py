"""Datasets: read records from JSONL, JSON, CSV, Parquet, the Hugging Face cache or memory.

Every source streams in batches and carries a content version (``sha256:<hex>``) for the run
manifest. See ``open_dataset``.
"""

from evalsi.datasets._confine import confine, param_file, param_files_confined
from evalsi.datasets._dataset import MAX_BAD_MESSAGES, Dataset, OnBadRecord
from evalsi.datasets._fields import FieldMap, read_trajectory, record_from_dict, record_to_row
from evalsi.datasets._hf import HfRef, hub_cache_dir, parse_hf_uri
from evalsi.datasets._source import SUPPORTED_SUFFIXES, FileFormat, open_dataset
from evalsi.datasets._warnings import DatasetWarning, RepeatedIds

__all__ = [
    "MAX_BAD_MESSAGES",
    "SUPPORTED_SUFFIXES",
    "Dataset",
    "DatasetWarning",
    "FieldMap",
    "FileFormat",
    "HfRef",
    "OnBadRecord",
    "RepeatedIds",
    "confine",
    "hub_cache_dir",
    "open_dataset",
    "param_file",
    "param_files_confined",
    "parse_hf_uri",
    "read_trajectory",
    "record_from_dict",
    "record_to_row",
]
