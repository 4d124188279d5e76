#!/usr/bin/env bash
# Build the documentation site into site/ (or the folder given as $1), failing on any warning.
# Installs the docs extra into the venv first. Preview while editing: .venv/bin/mkdocs serve
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e ".[docs]"
# The generated references must be current before they are published.
.venv/bin/python scripts/gen_cli_docs.py --check
.venv/bin/python scripts/gen_manifest_docs.py --check
.venv/bin/python scripts/gen_protocol_schema.py --check
.venv/bin/python scripts/gen_errors_doc.py --check
export NO_MKDOCS_2_WARNING=1  # Material's banner about MkDocs 2.0 (not a build warning)
.venv/bin/mkdocs build --strict --site-dir "${1:-site}"
