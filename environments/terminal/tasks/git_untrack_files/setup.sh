mkdir repo && cd repo && git init -q -b main
t=0
commit() {
  t=$((t + 1))
  d="2024-01-15T12:$(printf %02d "$t"):00+00:00"
  GIT_AUTHOR_DATE=$d GIT_COMMITTER_DATE=$d git commit -q -m "$1"
}
mkdir -p src node_modules/left-pad node_modules/.bin
printf 'console.log(1)\n' > src/index.js
printf '{"name": "app"}\n' > package.json
printf 'API_KEY=abc123\n' > secrets.env
printf 'module.exports = 1\n' > node_modules/left-pad/index.js
printf '#!/bin/sh\n' > node_modules/.bin/tool
printf 'dist/\n' > .gitignore
git add -A && commit "Initial import"
printf 'console.log(2)\n' > src/index.js
git add -A && commit "Update index"
