#!/usr/bin/env bash
# The issue's end-to-end check on the full data (minutes; not in CI, which
# runs the same on a small copy in tests/dist.sh): 3 epochs in one process,
# then as 2 MPI replicas with the same per-replica batch (lr as given, and
# scaled by the replicas as in the article). The replicas must land in the
# one-process accuracy band (within 2 points) with one set of output files
# and one progress display.
#   bash tests/dist_accuracy.sh build/convoy [epochs]
set -eu
convoy="$1"
epochs="${2:-3}"
command -v mpirun >/dev/null || { echo "skip: mpirun not found"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
acc() { python3 -c "import json,sys; print('%.4f' % json.load(open(sys.argv[1]))['test_accuracy'])" "$1/summary.json"; }

"$convoy" train --threads 2 --epochs "$epochs" --progress lines --out "$tmp/one" | tee "$tmp/one.log"
mpirun -np 2 "$convoy" train --strategy mpi --threads 1 --epochs "$epochs" --progress lines --out "$tmp/two" |
  tee "$tmp/two.log"
mpirun -np 2 "$convoy" train --strategy mpi --threads 1 --epochs "$epochs" --scale-lr --progress lines \
  --out "$tmp/scaled" | tee "$tmp/scaled.log"
for run in two scaled; do
  [[ $(grep -c "^epoch   $epochs/$epochs" "$tmp/$run.log") -eq 1 ]] || { echo "FAIL: $run: not one progress display"; exit 1; }
  [[ $(ls "$tmp/$run"/*.json | wc -l) -eq 1 ]] || { echo "FAIL: $run: not one summary"; exit 1; }
done
one=$(acc "$tmp/one") two=$(acc "$tmp/two") scaled=$(acc "$tmp/scaled")
echo "test accuracy after $epochs epochs: 1 process $one | 2 replicas $two | 2 replicas, scaled lr $scaled"
python3 -c "import sys; a = [float(x) for x in sys.argv[1:]]; sys.exit(any(abs(x - a[0]) > 0.02 for x in a[1:]))" \
  "$one" "$two" "$scaled" || { echo "FAIL: replicas outside the one-process band (2 points)"; exit 1; }
echo "ok: 2 replicas within 2 points of one process"
