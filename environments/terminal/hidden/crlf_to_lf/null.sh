# only the top level, and every kind of file
for f in notes/*; do [ -f "$f" ] && sed -i 's/\r$//' "$f"; done
