. "$CHECK_DIR/lib.sh"
check "release.tar.gz is a gzipped tar archive" tar -tzf release.tar.gz
expect_eq "the archive holds app/'s files but no bytecode or caches" 'app/docs/index.md
app/docs/pyc-notes.txt
app/main.py
app/pkg/__init__.py
app/pkg/core.py
app/pkg/sub/extra.py' "$(tar -tzf release.tar.gz 2>/dev/null | sed 's|^\./||' | grep -v '/$' | LC_ALL=C sort)"
check "no __pycache__ directory in the archive" sh -c '! tar -tzf release.tar.gz | grep -q __pycache__'
check "app/ still has its caches (nothing deleted)" test -f app/pkg/__pycache__/core.cpython-311.pyc -a -f app/pkg/sub/old.pyc
finish
