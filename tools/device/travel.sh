#!/usr/bin/env bash
# The device tool sends the whole working tree at every call, at most 64 MiB of it, and the committed
# results (reports/) have grown past what fits beside .whl and .carry. A study on the device reads none
# of them (it resumes from .carry), so for a lease they leave the index and are ignored, and come back after.
#   bash tools/device/travel.sh light     # before the lease's first call; commit nothing until restore
#   bash tools/device/travel.sh restore   # after the lease's last call
#   bash tools/device/travel.sh size      # MiB that would travel with .whl and .carry
set -euo pipefail
cd "$(dirname "$0")/../.."
EXCLUDE=$(git rev-parse --git-path info/exclude)
LINE=/reports/
case "${1:-}" in
  light)
    grep -qxF "$LINE" "$EXCLUDE" 2>/dev/null && { echo "travel.sh: already light; restore after the lease"; exit 0; }
    git diff --cached --quiet || { echo "travel.sh: the index holds staged changes; commit them first" >&2; exit 1; }
    git rm -r -q --cached reports
    grep -qxF "$LINE" "$EXCLUDE" || echo "$LINE" >> "$EXCLUDE" ;;
  restore)
    git reset -q -- reports
    grep -vxF "$LINE" "$EXCLUDE" > "$EXCLUDE.new" || true
    mv "$EXCLUDE.new" "$EXCLUDE" ;;
  size)
    { git ls-files -z; git ls-files -z --others --exclude-standard; find .whl .carry -type f -print0 2>/dev/null; } |
      du -cb --files0-from=- | tail -1 | awk '{printf "%.1f MiB\n", $1 / 1048576}' ;;
  *) echo "usage: travel.sh light|restore|size" >&2; exit 2 ;;
esac
