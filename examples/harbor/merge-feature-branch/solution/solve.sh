#!/bin/bash
set -e
cd /app/repo
git checkout -q main
git merge --no-ff --no-edit feature
git tag -a v2.0 -m "Release 2.0"
