"""Create a bucket on an S3 API (the guide's moto server), waiting up to 15 s for it to answer.

    python examples/sinks/make_bucket.py http://127.0.0.1:18555 evals
"""

from __future__ import annotations

import sys
import time

import boto3
from botocore.exceptions import EndpointConnectionError

endpoint, bucket = sys.argv[1], sys.argv[2]
s3 = boto3.client(
    "s3",
    endpoint_url=endpoint,
    region_name="us-east-1",
    aws_access_key_id="test",
    aws_secret_access_key="test",
)
for _ in range(150):
    try:
        s3.create_bucket(Bucket=bucket)
        break
    except EndpointConnectionError:
        time.sleep(0.1)
else:
    sys.exit(f"{endpoint} did not answer")
print(f"bucket {bucket} ready at {endpoint}")
