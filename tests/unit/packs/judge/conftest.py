from tests.support.conftest_plugin import stub_llm

__all__ = ["stub_llm"]
