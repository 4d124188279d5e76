awk '$3 == "ERROR" { split($2, t, ":"); n[t[1]]++ } END { for (h in n) print h, n[h] }' app.log | sort > errors_by_hour.txt
cat errors_by_hour.txt
