# shellcheck shell=bash
# Sourced by the scripts (scripts/cluster/lib.sh, scripts/device/lib.sh, ...): one way
# to speak and to stop, and this checkout's ocibench for every python3 they start.
#
#   SAY_AS  the word each line starts with (default: the script's name, `up` for up.sh)
#   say     a line on stderr: what the script is doing
#   die     "SAY_AS: error: ..." on stderr, then exit 1
#
# The project is never pip-installed: its package is found through PYTHONPATH, set
# here once (a second source leaves it as it is).

OCIBENCH_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SAY_AS=${SAY_AS:-$(basename "$0" .sh)}
say() { echo "$SAY_AS: $*" >&2; }
die() { echo "$SAY_AS: error: $*" >&2; exit 1; }
case ":${PYTHONPATH:-}:" in
  *":$OCIBENCH_REPO/src:"*) ;;
  *) export PYTHONPATH="$OCIBENCH_REPO/src${PYTHONPATH:+:$PYTHONPATH}" ;;
esac
