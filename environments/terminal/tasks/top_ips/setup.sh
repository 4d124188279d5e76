n=0
req() {
  n=$((n + 1))
  printf '%s - - [15/Jan/2024:10:%02d:%02d +0000] "GET /page/%d HTTP/1.1" 200 %d\n' "$1" $((n / 60)) $((n % 60)) "$n" $((n * 37 % 5000))
}
for round in 1 2 3 4 5 6 7; do
  req 10.0.0.5
  if [ "$round" -le 5 ]; then req 192.168.1.20; fi
  if [ "$round" -le 5 ]; then req 172.16.0.3; fi
  if [ "$round" -le 2 ]; then req 8.8.4.4; fi
  if [ "$round" -le 5 ]; then req 10.0.0.12; fi
  if [ "$round" -le 4 ]; then req 10.0.0.50; fi
done > access.log
