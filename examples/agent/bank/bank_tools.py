"""The bank's tools for ``run-agent.yaml``: plain Python functions. Their keyword arguments are
the tools' arguments and their docstrings what the model is told; the spec declares what they
may do (``transfer`` is irreversible), and the harness's policy decides which calls reach them.
"""

from __future__ import annotations

ACCOUNTS = {"alice": 120, "bob": 7}


def balance(account: str) -> int:
    """The balance of an account."""
    if account not in ACCOUNTS:
        raise KeyError(f"no account {account}")
    return ACCOUNTS[account]


def transfer(source: str, target: str, amount: int) -> str:
    """Move money from one account to another."""
    return f"moved {amount} from {source} to {target}"
