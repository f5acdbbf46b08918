#!/usr/bin/env bash
# Wait up to SECONDS for the pipeline, print where it is, and put its logs and results
# under $OUT (docs/device-runs.md).
#   bash scripts/device/collect.sh SECONDS
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

collect() {
  local seconds=${1:-0} last="" now
  local deadline=$((SECONDS + seconds))
  while [[ ! -f $STATE/done ]] && ((SECONDS < deadline)); do
    now=$(cat "$STATE/step" 2>/dev/null)
    [[ $now != "$last" ]] && echo "$(date -u +%T) step: $now" && last=$now
    sleep 5
  done
  echo "== pipeline.log"; tail -40 "$LOGS/pipeline.log" 2>/dev/null
  if [[ -f $STATE/failed ]]; then
    echo "== FAILED: $(cat "$STATE/failed")"
    for f in "$LOGS"/0*.log; do echo "== tail $f"; tail -15 "$f"; done
  fi
  [[ -f $RES/summary.txt ]] && { echo "== summary"; cat "$RES/summary.txt"; }
  if [[ -n ${OUT:-} ]]; then
    tar -C "$WORK" --exclude='*.so' -czf "$OUT/gpu-path.tgz" logs results state 2>/dev/null
    [[ -f $RES/summary.txt ]] && cp "$RES/summary.txt" "$RES/summary.json" "$OUT/" 2>/dev/null
    if [[ -f $STATE/done && -d $WORK/buildcache ]]; then
      # In parts, joined again with `cat buildcache.tar.part-* | tar -x -C .carry`
      # (docs/device-runs.md).
      tar -C "$WORK" -cf - buildcache | split -b 15M - "$OUT/buildcache.tar.part-"
      du -ch "$OUT"/buildcache.tar.part-* | tail -1
    fi
    ls -la "$OUT"
  fi
}

collect "${1:-0}"
