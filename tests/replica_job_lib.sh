# Sourced by the multi-process tests (dist.sh, nccl_replicas.sh): a scratch
# folder $tmp and one background job $job, whose children are the ranks;
# at exit the job is killed and the folder removed.
tmp=$(mktemp -d)
job=""
cleanup() {
  [[ -n "$job" ]] && kill -9 "$job" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
# Runs "$@" in the background as $job, its output in $tmp/job.log. The log is
# emptied here, in this shell, before the job starts: the job's own redirect
# runs in the forked child, and a wait that reads the log first would find the
# previous job's lines in it (CI saw "epoch 1/" matched 0.4 s after a start,
# before mpirun had any ranks).
start() { : >"$tmp/job.log"; "$@" >>"$tmp/job.log" 2>&1 & job=$!; }
ranks() { pgrep -P "$job" -f "convoy train" || true; }
seconds() { date +%s.%N; }
