#!/usr/bin/env bash
# Keep the checkout's .carry-big/ (the bundle's largest files, Debian packages) in
# $STASH for the next call's start.sh, which a fresh run would otherwise lack
# (docs/device-runs.md).
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
rm -rf "$STASH"; mkdir -p "$STASH" && cp -r "$SRC/.carry-big/." "$STASH/" && du -sh "$STASH"
