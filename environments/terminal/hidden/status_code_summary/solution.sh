# The Harbor task's solution/solve.sh, run as Harbor's oracle runs it.
cd /app && bash -c '#!/bin/bash
set -euo pipefail
cd /app
awk '"'"'{ print $(NF - 1) }'"'"' logs/access.log | sort | uniq -c | sort -k1,1nr -k2,2n | awk '"'"'{ print $2, $1 }'"'"' > summary.txt
' solve.sh
