#!/bin/bash
# This verifier writes a JSON reward (Harbor reads reward.txt or reward.json)
python3 /tests/check_config.py /app/config.json > /logs/verifier/reward.json
