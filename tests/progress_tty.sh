#!/usr/bin/env bash
# The live progress bar on a real terminal of 80 columns (a pseudo-terminal):
# every redraw stays on one line (no segment between carriage returns reaches
# the last column, so the terminal never wraps), the bar names the epoch and
# shows the evaluation, and the output has exactly one line per epoch besides
# the banner and the final line.
#   tests/progress_tty.sh build/convoy
set -eu  # no pipefail: small_data.sh cuts zcat short on purpose
convoy="$1"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/small_data.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make_small_fashion "$tmp/data" 12800 4000

python3 - "$convoy" "$tmp/data" <<'PY'
import fcntl, os, pty, re, struct, sys, termios
convoy, data = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.environ.pop("COLUMNS", None)
    os.execv(convoy, [convoy, "train", "--data", data, "--epochs", "3", "--threads", "1", "--progress", "bar"])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
out = b""
while True:
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", out.decode("utf-8", "replace"))
assert os.WEXITSTATUS(status) == 0, f"convoy exited {os.WEXITSTATUS(status)}:\n{text}"
segments = re.split(r"[\r\n]", text)
# The bar's redraws and the epoch lines (the one-off banner may wrap).
drawn = [s for s in segments if s.startswith(("Epoch ", "epoch "))]
longest = max(len(s) for s in drawn)
assert longest < 80, f"a line of {longest} columns wraps an 80-column terminal: {max(drawn, key=len)!r}"
bars = [s for s in segments if s.startswith("Epoch ")]
assert any(re.match(r"Epoch 2/3 +\d+/100 \[", s) for s in bars), f"no bar names epoch 2/3: {bars[:5]}"
assert any("evaluating" in s for s in bars), "the evaluation pass is not shown"
# Up to the summary line (the per-class block after it is a table of its own):
# banner + 3 epoch lines + the summary line; nothing else may start a new line.
training = text[: text.index("total training time")] if "total training time" in text else text
newlines = training.count("\n") + 1
assert newlines <= 6, f"{newlines} new lines for a 3-epoch run (the bar wrapped?):\n{text}"
print(f"ok: {len(bars)} redraws on one line each (longest {longest} of 80 columns), {newlines} new lines")
PY
