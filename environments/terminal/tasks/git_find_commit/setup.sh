mkdir repo && cd repo && git init -q -b main
t=0
commit() {
  t=$((t + 1))
  d="2024-01-15T12:$(printf %02d "$t"):00+00:00"
  GIT_AUTHOR_DATE=$d GIT_COMMITTER_DATE=$d git commit -q -m "$1"
}
printf 'server: api\n' > config.yml
git add -A && commit "Initial config"
printf 'server: api\ntimeout: 30\n' > config.yml
git add -A && commit "Add a timeout"
printf 'import os\nTOKEN = os.environ["LEGACY_TOKEN"]\n' > auth.py
git add -A && commit "Read the auth token from the environment"
printf 'import os\nTOKEN = os.environ.get("LEGACY_TOKEN", "")\n' > auth.py
git add -A && commit "Tolerate a missing token"
printf 'server: api\ntimeout: 60\n' > config.yml
git add -A && commit "Raise the timeout"
printf '# LEGACY_TOKEN is deprecated\n' > NOTES.md
git add -A && commit "Add notes"
