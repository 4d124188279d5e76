#!/bin/bash
# The expected summary of environment/access.log, fixed when the task was written.
expected='200 23
404 9
304 6
301 4
500 4
403 2'
mkdir -p /logs/verifier
if [ -f /app/summary.txt ] && [ "$(cat /app/summary.txt)" = "$expected" ]; then
  echo "summary.txt is right"
  echo 1 > /logs/verifier/reward.txt
else
  echo "summary.txt is missing or wrong:"
  cat /app/summary.txt 2>/dev/null
  echo 0 > /logs/verifier/reward.txt
fi
