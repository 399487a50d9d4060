"""Model and service clients for the Run way in: targets, retries, rate limits, breakers.

Every target (``OpenAICompatible``, ``Anthropic``, ``AzureOpenAI``, ``Gemini``, ``Bedrock``,
``PythonTarget``, ``HttpTarget``) has
``async invoke(input) -> TargetOutput`` and ``describe()`` (its identity for the manifest, no
secret values). A failed call raises ``InfraError(kind)`` (retried, then reported apart and never
counted as a failure) or ``TargetError`` (the target's own error, recorded on the sample).
A server hands its ``EgressPolicy`` down in ``Resilience.egress``; the connectors' session then
connects only where the policy allows. aiohttp is imported on the first HTTP call, not here.
"""

from evalsi.connectors._anthropic import Anthropic
from evalsi.connectors._azure import AzureOpenAI, azure_endpoint_problem
from evalsi.connectors._bedrock import Bedrock, bedrock_region_problem
from evalsi.connectors._breaker import BreakerPolicy, BreakerRegistry, BreakerState, CircuitBreaker
from evalsi.connectors._clock import SYSTEM_CLOCK, Clock, SystemClock
from evalsi.connectors._egress import (
    EgressDenied,
    EgressPolicy,
    EgressRule,
    literal_address,
    trusted_rule,
)
from evalsi.connectors._errors import INFRA_KINDS, InfraError, InfraKind, TargetError
from evalsi.connectors._gemini import Gemini
from evalsi.connectors._guard import Resilience, default_resilience
from evalsi.connectors._http import (
    DEFAULT_CONNECTION_LIMIT,
    close_shared_session,
    egress_connector,
    shared_session,
)
from evalsi.connectors._http_target import HttpTarget, render
from evalsi.connectors._jsonpath import JsonPath, JsonPathMiss
from evalsi.connectors._limiters import RateLimiterRegistry
from evalsi.connectors._models import (
    BASE_URL_OPTIONAL,
    BEARER_CONNECTORS,
    DEFAULT_BASE_URLS,
    MODEL_CONNECTORS,
    chat_model,
)
from evalsi.connectors._openai import OpenAICompatible
from evalsi.connectors._python import PythonTarget, load_callable
from evalsi.connectors._ratelimit import RateLimiter, RateLimits, TokenBucket
from evalsi.connectors._retry import RetryPolicy, parse_retry_after, retrying
from evalsi.connectors._secrets import Secret, resolve_secret
from evalsi.connectors._shared_rate import RateWindows, SharedRateLimiter
from evalsi.connectors._types import (
    Completion,
    InputLike,
    Target,
    TargetOutput,
    TaskInfo,
    input_messages,
    plain_input,
)

__all__ = [
    "BASE_URL_OPTIONAL",
    "BEARER_CONNECTORS",
    "DEFAULT_BASE_URLS",
    "DEFAULT_CONNECTION_LIMIT",
    "INFRA_KINDS",
    "MODEL_CONNECTORS",
    "SYSTEM_CLOCK",
    "Anthropic",
    "AzureOpenAI",
    "Bedrock",
    "BreakerPolicy",
    "BreakerRegistry",
    "BreakerState",
    "CircuitBreaker",
    "Clock",
    "Completion",
    "EgressDenied",
    "EgressPolicy",
    "EgressRule",
    "Gemini",
    "HttpTarget",
    "InfraError",
    "InfraKind",
    "InputLike",
    "JsonPath",
    "JsonPathMiss",
    "OpenAICompatible",
    "PythonTarget",
    "RateLimiter",
    "RateLimiterRegistry",
    "RateLimits",
    "RateWindows",
    "Resilience",
    "RetryPolicy",
    "Secret",
    "SharedRateLimiter",
    "SystemClock",
    "Target",
    "TargetError",
    "TargetOutput",
    "TaskInfo",
    "TokenBucket",
    "azure_endpoint_problem",
    "bedrock_region_problem",
    "chat_model",
    "close_shared_session",
    "default_resilience",
    "egress_connector",
    "input_messages",
    "literal_address",
    "load_callable",
    "parse_retry_after",
    "plain_input",
    "render",
    "resolve_secret",
    "retrying",
    "shared_session",
    "trusted_rule",
]
