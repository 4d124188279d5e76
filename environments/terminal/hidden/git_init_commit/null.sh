cd project && git init -q -b main && git add -A && git commit -q -m 'Initial commit'
