#!/usr/bin/env bash
# Builds the page's plot component into explorer/app/ui/templates (committed: the app needs no node to run).
# Needs node 20 and npm; `npm ci` installs the frontend's pinned packages from the registry.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
mkdir -p "$here/backend"  # the build examines the component from there (it holds nothing)
cd "$here/frontend"
[ -d node_modules ] || npm ci --no-audit --no-fund
gradio_frontend="$(python -c 'import gradio, os; print(os.path.join(os.path.dirname(gradio.__file__), "templates", "frontend"))')"
PYTHONPATH="$repo" node node_modules/@gradio/preview/dist/index.js \
  --component-directory "$here" --root "$gradio_frontend" --mode build --python-path python
git -C "$repo" checkout -- components/plot_view/pyproject.toml 2>/dev/null || true  # the build writes its artifacts there
# What the build was made from, beside it: tests/test_component_build.py fails when a source changes without a rebuild.
(cd "$repo" && python -m explorer.app.ui.component_build --write)
