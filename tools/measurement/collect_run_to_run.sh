# Turns the fetched outputs of tools/measurement/run_to_run_on_gpu.sh into committed files:
#   bash tools/measurement/collect_run_to_run.sh FETCHED_DIR
# writes reports/reference/measurement/run_to_run/ (report.html, summary.csv, stats.csv, plots/, the
# run-to-run comparison compare.txt and both benchmark JSON files).
set -euo pipefail
fetched=${1:?usage: collect_run_to_run.sh FETCHED_DIR}
dest=reports/reference/measurement/run_to_run
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar xzf "$fetched/results.tgz" -C "$work"
mkdir -p "$dest"
cp "$fetched/a.json" "$fetched/b.json" "$fetched/compare.txt" "$dest/"
python -m pytest_gpu_pairs.cli report "$dest/a.json" "$dest/b.json" -o "$dest" \
  --title "H100 slice, two identical runs back to back"
echo "wrote $dest; review and commit it"
