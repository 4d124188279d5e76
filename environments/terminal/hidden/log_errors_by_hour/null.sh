grep -i error app.log | cut -c12-13 | sort | uniq -c | awk '{ print $2, $1 }' > errors_by_hour.txt
