mkdir -p app/pkg/__pycache__ app/__pycache__ app/pkg/sub app/docs
printf 'print("main")\n' > app/main.py
printf '' > app/pkg/__init__.py
printf 'x = 1\n' > app/pkg/core.py
printf 'y = 2\n' > app/pkg/sub/extra.py
printf 'bytecode' > app/pkg/__pycache__/core.cpython-311.pyc
printf 'bytecode' > app/__pycache__/main.cpython-311.pyc
printf 'stray' > app/pkg/sub/old.pyc
printf 'docs\n' > app/docs/index.md
printf 'not bytecode\n' > app/docs/pyc-notes.txt
