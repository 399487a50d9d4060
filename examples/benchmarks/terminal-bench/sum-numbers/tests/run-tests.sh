#!/bin/bash
python3 "$TEST_DIR/runner.py" "$TEST_DIR/test_outputs.py"
