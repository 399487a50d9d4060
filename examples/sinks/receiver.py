"""A webhook receiver for evalsi: checks the signature, drops a delivery it has seen (retries
and re-exports keep their X-Evalsi-Delivery id), and prints each new run's metrics
(``run.finished``) or each score an online policy sent (``policy.scores``).

    env HOOK_SECRET=... python examples/sinks/receiver.py --port 18556
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.server
import json
import os

seen: set[str] = set()


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        secret = os.environ.get("HOOK_SECRET", "")
        if secret:
            mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            if not hmac.compare_digest(f"sha256={mac}", self.headers.get("X-Evalsi-Signature", "")):
                self.send_response(401)
                self.end_headers()
                return
        delivery = self.headers.get("X-Evalsi-Delivery", "")
        if delivery not in seen:
            seen.add(delivery)
            doc = json.loads(body)
            if doc["event"] == "policy.scores":
                for s in doc["scores"]:
                    print(f"{s['policy']} {s['trace_id']} {s['evaluator']}: {s['value']}", flush=True)
            else:
                for m in doc["summary"].get("metrics", []):
                    print(f"{doc['run']['run_id']} {m['evaluator']}/{m['metric']}: {m['mean']}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18556)
    port = parser.parse_args().port
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Receiver).serve_forever()
