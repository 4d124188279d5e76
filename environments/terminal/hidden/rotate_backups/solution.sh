cat > rotate.sh <<'SH'
#!/bin/bash
# usage: rotate.sh DIR N -- keep the N newest *.bak files directly in DIR
set -euo pipefail
dir=$1
keep=$2
find "$dir" -mindepth 1 -maxdepth 1 -type f -name '*.bak' -printf '%T@ %p\0' \
  | sort -z -rn \
  | tail -z -n +"$((keep + 1))" \
  | cut -z -d' ' -f2- \
  | xargs -0 -r rm -f --
SH
chmod +x rotate.sh
# ---
./rotate.sh backups 2 && ls backups
