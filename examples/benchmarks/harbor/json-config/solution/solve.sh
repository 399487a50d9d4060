#!/bin/bash
python3 - <<'PY'
import json
config = json.load(open("config.json"))
config.update(port=8081, debug=False)
json.dump(config, open("config.json", "w"))
PY
