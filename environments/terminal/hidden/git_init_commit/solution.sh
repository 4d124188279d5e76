cd project
git init -q -b main
# ---
echo '*.log' > .gitignore
git add -A
git commit -q -m 'Initial commit'
# ---
git status --short; git log --oneline
