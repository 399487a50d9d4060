"""The task's rows, read from the file beside this one: a relative `data_files` in the YAML
would resolve against the working directory instead."""

from pathlib import Path
from typing import Any

import datasets


def load(**_: Any) -> datasets.DatasetDict:
    rows = str(Path(__file__).with_name("capitals.jsonl"))
    return datasets.load_dataset("json", data_files={"test": rows})
