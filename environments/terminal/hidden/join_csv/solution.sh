{
  echo 'name,department'
  awk -F, 'FNR == 1 { next } NR == FNR { dept[$1] = $2; next } { print $2 "," (($3 in dept) ? dept[$3] : "UNKNOWN") }' departments.csv employees.csv | LC_ALL=C sort
} > report.csv
cat report.csv
