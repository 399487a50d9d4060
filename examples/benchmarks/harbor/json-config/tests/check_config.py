import json
import sys

try:
    with open(sys.argv[1]) as f:
        config = json.load(f)
    ok = config == {"name": "svc", "port": 8081, "debug": False, "workers": 4}
except (OSError, ValueError):
    ok = False
print(json.dumps({"reward": 1.0 if ok else 0.0}))
