# line-based grep: misses the user whose fields span lines, keeps "true" strings
grep '"active": *true' users.json | sed 's/.*"email": "\([^"]*\)".*/\1/' | tr A-Z a-z | sort -u > active_emails.txt
