#!/usr/bin/env bash
# Lint, run by `make test` (scripts/test.sh) before pytest and alone by `make lint`:
# ruff on the Python (settings in pyproject.toml) and shellcheck on scripts/ and
# .ci/run (settings in .shellcheckrc).  Any finding fails.  shellcheck alone may be
# absent (prereqs.sh installs it only as root with apt-get): then that step is
# skipped, saying so.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

say() { echo "lint: $*" >&2; }
failed=() passed=() skipped=()

if ! python3 -m ruff --version >/dev/null 2>&1; then
  say "ruff is not installed: pip install ruff (scripts/prereqs.sh does)"
  failed+=(ruff)
elif ! python3 -m ruff check --quiet --output-format concise .; then
  say "ruff found the problems above (settings: pyproject.toml [tool.ruff];" \
    "python3 -m ruff check --fix . fixes some)"
  failed+=(ruff)
else
  passed+=(ruff)
fi

shell_scripts=(scripts/*.sh scripts/*/*.sh .ci/run bin/ocibench)
if ! command -v shellcheck >/dev/null; then
  say "SKIPPED shellcheck: not installed (scripts/prereqs.sh installs it only as root" \
    "with apt-get); install the shellcheck package to lint scripts/"
  skipped+=(shellcheck)
elif ! shellcheck "${shell_scripts[@]}"; then
  say "shellcheck found the problems above (settings: .shellcheckrc; a finding that is" \
    "intended gets a '# shellcheck disable=SCxxxx  # why' line above it)"
  failed+=(shellcheck)
else
  passed+=(shellcheck)
fi

if ((${#failed[@]})); then
  say "FAILED: ${failed[*]}"
  exit 1
fi
say "no findings: ${passed[*]}${skipped[*]:+ (skipped: ${skipped[*]})}"
