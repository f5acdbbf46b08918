#!/usr/bin/env bash
# One line: the step the pipeline is in (docs/device-runs.md).
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
cat "$STATE/step" 2>/dev/null || echo "not started"
