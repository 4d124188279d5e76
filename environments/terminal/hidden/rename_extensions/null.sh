# word splitting breaks the names with spaces
for f in $(ls photos/*.jpeg); do mv $f ${f%.jpeg}.jpg; done
