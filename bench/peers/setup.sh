#!/usr/bin/env bash
# Create (or refresh) the isolated venv that runs the peer frameworks
# (Inspect AI, DeepEval) for the scoring-throughput benchmark.
#
#   bash bench/peers/setup.sh           # create / bring up to date (idempotent)
#   bash bench/peers/setup.sh --force   # delete and rebuild from scratch
#
# The venv lives in bench/.peers/venv (git-ignored) and is kept apart from
# evalsi's own environment: the peers pull in ~110 packages (~440 MB).
# It is skipped when requirements.txt and the interpreter are unchanged since
# the last successful install (stamp file inside the venv).
# PEERS_PYTHON overrides the interpreter (default: python3.11).
# Only PyPI is needed; nothing is fetched at run time by the peer scripts.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench_dir="$(dirname "$here")"
venv="$bench_dir/.peers/venv"
req="$here/requirements.txt"
py="${PEERS_PYTHON:-python3.11}"
stamp="$venv/.peers-requirements.sha256"

if [[ "${1:-}" == "--force" ]]; then
    rm -rf "$venv"
fi

if ! command -v "$py" >/dev/null 2>&1; then
    echo "setup.sh: $py not found (set PEERS_PYTHON to a Python 3.11 interpreter)" >&2
    exit 1
fi

want="$( { sha256sum "$req" | cut -d' ' -f1; "$py" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"

if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
    && "$venv/bin/python" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("inspect_ai") and u.find_spec("deepeval")))' >/dev/null 2>&1; then
    echo "peers venv up to date: $venv" >&2
else
    start=$(date +%s)
    # A venv left by an interrupted run or made by another interpreter is rebuilt.
    if [[ -d "$venv" ]] && ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1; then
        rm -rf "$venv"
    fi
    mkdir -p "$(dirname "$venv")"
    [[ -x "$venv/bin/python" ]] || "$py" -m venv "$venv"
    rm -f "$stamp"
    # This machine's pip config lists local mirror folders that may be empty;
    # drop pip's per-package "Location ... is ignored" noise, keep everything else.
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" 2>&1 \
        | { grep -v "is ignored: it is neither a file nor a directory" || true; } >&2
    "$venv/bin/python" -m pip check >&2
    echo "$want" >"$stamp"
    echo "peers venv installed in $(( $(date +%s) - start ))s: $venv" >&2
fi

"$venv/bin/python" - <<'EOF' >&2
import importlib.metadata as m
print("  inspect-ai", m.version("inspect-ai"), "| deepeval", m.version("deepeval"))
EOF
# stdout: just the interpreter to run the peers with.
echo "$venv/bin/python"
