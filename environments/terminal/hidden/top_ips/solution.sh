cut -d' ' -f1 access.log | LC_ALL=C sort | uniq -c | awk '{ print $1, $2 }' | LC_ALL=C sort -k1,1nr -k2,2 | head -n 3 > top_ips.txt
cat top_ips.txt
