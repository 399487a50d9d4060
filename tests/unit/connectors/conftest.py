"""The connector tests run against the stub LLM server over real HTTP on loopback."""

from tests.support.conftest_plugin import stub_llm

__all__ = ["stub_llm"]
