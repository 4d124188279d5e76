mkdir repo && cd repo && git init -q -b main
t=0
commit() {
  t=$((t + 1))
  d="2024-01-15T12:$(printf %02d "$t"):00+00:00"
  GIT_AUTHOR_DATE=$d GIT_COMMITTER_DATE=$d git commit -q -m "$1"
}
printf 'def handle(request):\n    return "ok"\n' > app.py
git add -A && commit "Add handler"
printf 'import logging\nlogging.basicConfig(level=logging.DEBUG)\n' > debug.py
sed -i '1i import debug' app.py
git add -A && commit "Add debug logging"
printf 'requests==2.31.0\n' > requirements.txt
git add -A && commit "Pin requests"
printf 'def handle(request):\n    return "ok"\n\n\ndef health():\n    return "up"\n' > health.py
git add -A && commit "Add health check"
