#!/usr/bin/env bash
# Render the architecture pictures: docs/architecture/*.dot (Graphviz sources) to the SVGs
# committed beside them, which docs/architecture.md shows. Needs Graphviz's `dot`
# (Debian: apt-get install graphviz). Run after editing a .dot file and commit both.
set -euo pipefail
cd "$(dirname "$0")/../docs/architecture"
for source in *.dot; do
  dot -Tsvg "$source" -o "${source%.dot}.svg"
  echo "rendered docs/architecture/${source%.dot}.svg"
done
