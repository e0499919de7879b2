# Turns the fetched outputs of scripts/device/issue-7.sh into committed files:
#   bash scripts/device/issue-7-collect.sh FETCHED_DIR
# writes reports/reference/h100-slice-noise/ (report.html, summary.csv, stats.csv, plots/, the
# run-to-run comparison compare.txt and both benchmark JSON files).
set -euo pipefail
fetched=${1:?usage: issue-7-collect.sh FETCHED_DIR}
dest=reports/reference/h100-slice-noise
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar xzf "$fetched/results.tgz" -C "$work"
mkdir -p "$dest"
cp "$fetched/a.json" "$fetched/b.json" "$fetched/compare.txt" "$dest/"
python -m pytest_gpu_pairs.cli report "$dest/a.json" "$dest/b.json" -o "$dest" \
  --title "H100 slice, two identical runs back to back"
echo "wrote $dest; review and commit it"
