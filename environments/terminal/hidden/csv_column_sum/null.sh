# grep matches EU-East too
grep ',EU' sales.csv | awk -F, '{ total += $4 } END { print total }' > eu_total.txt
