# sort -rn breaks the ties the wrong way
awk '{ print $1 }' access.log | sort | uniq -c | sort -rn | head -n 3 | awk '{ print $1, $2 }' > top_ips.txt
