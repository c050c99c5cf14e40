#!/usr/bin/env bash
# Rewrites the README's table of run-config keys (between its config-keys
# markers) from the schema: `convoy help config --markdown`. Run it after
# adding or changing a key; tests/test_config_schema.cpp fails until then.
# Usage: tools/readme_config_table.sh [path/to/convoy]   (default: build/convoy)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
convoy=${1:-$root/build/convoy}
readme=$root/README.md
table=$("$convoy" help config --markdown)
grep -q '^<!-- config-keys:begin' "$readme" && grep -q '^<!-- config-keys:end' "$readme" ||
  { echo "readme_config_table: $readme has no config-keys markers; add <!-- config-keys:begin --> and <!-- config-keys:end -->" >&2; exit 2; }
TABLE=$table awk '
  /^<!-- config-keys:begin/ { print; print ENVIRON["TABLE"]; skip = 1; next }
  /^<!-- config-keys:end/ { skip = 0 }
  !skip { print }' "$readme" >"$readme.tmp"
mv "$readme.tmp" "$readme"
echo "wrote the config table of $readme ($(printf '%s\n' "$table" | wc -l) lines)"
