# join(1) drops the employees without a department
{
  echo 'name,department'
  join -t, -1 3 -2 1 -o 1.2,2.2 <(tail -n +2 employees.csv | sort -t, -k3,3) <(tail -n +2 departments.csv | sort -t, -k1,1) | LC_ALL=C sort
} > report.csv
