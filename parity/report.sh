#!/usr/bin/env bash
# `bazel run //parity:report`: regenerates parity/REPORT.md from the specs and a checker run.
set -euo pipefail
exec "$1" --goldens=parity/goldens/python --report=parity/REPORT.md
