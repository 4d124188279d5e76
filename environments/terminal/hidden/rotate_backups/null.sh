# keeps the last names in alphabetical order, not the newest files
cat > rotate.sh <<'SH'
#!/bin/bash
cd "$1" || exit 1
ls -1 *.bak | head -n -"$2" | while read -r f; do rm -f "$f"; done
SH
chmod +x rotate.sh
