head -1 sales.csv
# ---
awk -F, 'NR > 1 && $2 == "EU" { total += $4 } END { print total }' sales.csv > eu_total.txt
cat eu_total.txt
