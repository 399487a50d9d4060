"""A SigV4 check for requests the stub recorded: the ``Authorization`` header is well formed
and botocore computes the same signature for the request exactly as it arrived (raw path,
headers, body bytes), so a request changed after signing, or a path requoted on the way, fails.
"""

from __future__ import annotations

import re

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.stub_llm import StubRequest

KEY_ID = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "tok-1"
AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/"
    r"bedrock/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<sig>[0-9a-f]{64})"
)


def verify_sigv4(request: StubRequest, root: str, region: str) -> None:
    """Assert ``request`` (sent to ``root``) is signed for Bedrock in ``region`` with the test
    credentials (``KEY_ID``, ``SECRET_KEY``, ``TOKEN``)."""
    headers = {k.lower(): v for k, v in request.headers.items()}
    match = AUTH.fullmatch(headers["authorization"])
    assert match is not None, headers["authorization"]
    assert (match["key"], match["region"]) == (KEY_ID, region)
    assert match["date"] == headers["x-amz-date"][:8]
    signed = match["signed"].split(";")
    assert signed == ["content-type", "host", "x-amz-date", "x-amz-security-token"]
    aws = AWSRequest(
        method=request.method,
        url=root + request.raw_path,
        data=request.raw,
        headers={name: headers[name] for name in signed if name != "host"},
    )
    aws.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(Credentials(KEY_ID, SECRET_KEY, TOKEN), "bedrock", region)
    canonical = signer.canonical_request(aws)
    assert signer.signature(signer.string_to_sign(aws, canonical), aws) == match["sig"]
