#!/usr/bin/env bash
# Renders a run's report.html in headless Chromium and checks that the page
# loads and every picture on it decodes (naturalWidth > 0). A wrapper page in
# the same folder loads the report in an iframe and writes what it found into
# its title, which --dump-dom prints. Skips (exit 0) when Chromium is absent.
#   tests/report_renders.sh RUN_DIR
set -eu
dir="$1"
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z "$chrome" ]]; then
  echo "SKIP: no Chromium installed (apt-get install chromium) — report.html not rendered"
  exit 0
fi
[[ -f "$dir/report.html" ]] || { echo "FAIL: $dir/report.html missing"; exit 1; }
wrapper="$dir/.render_check.html"
trap 'rm -f "$wrapper"' EXIT
cat >"$wrapper" <<'HTML'
<!doctype html><html><head><title>pending</title></head><body>
<iframe id="r" src="report.html" width="1200" height="900"></iframe>
<script>
document.getElementById("r").onload = function () {
  const doc = this.contentDocument;
  const imgs = Array.from(doc.images);
  const broken = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute("src"));
  document.title = "images=" + imgs.length + " broken=" + broken.length + " [" + broken.join(",") + "] h1=" +
                   (doc.querySelector("h1") ? doc.querySelector("h1").textContent : "none");
};
</script></body></html>
HTML
out=$(timeout 120 "$chrome" --headless=new --no-sandbox --disable-gpu --allow-file-access-from-files \
  --virtual-time-budget=5000 --dump-dom "file://$(realpath "$wrapper")" 2>/dev/null || true)
title=$(sed -n 's:.*<title>\(.*\)</title>.*:\1:p' <<<"$out" | head -1)
echo "chromium: $title"
[[ "$title" =~ images=([0-9]+)\ broken=0 ]] || { echo "FAIL: report.html did not render cleanly"; exit 1; }
(( BASH_REMATCH[1] >= 3 )) || { echo "FAIL: expected the 3 pictures, found ${BASH_REMATCH[1]}"; exit 1; }
