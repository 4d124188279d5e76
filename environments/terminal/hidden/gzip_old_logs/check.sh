. "$CHECK_DIR/lib.sh"
expect_eq "the old logs are replaced by .gz files" 'README
app-0.log.gz
app-1.log.gz
app-2.log.gz
app-3.log.gz
current.log
manual backup.log.gz' "$(file_list logs)"
for i in 1 2 3; do
  expect_eq "app-$i.log.gz decompresses to the log" "day $i
line two" "$(gzip -dc "logs/app-$i.log.gz" 2>/dev/null)"
done
expect_eq "manual backup.log.gz decompresses to the log" "rotated by hand" "$(gzip -dc "logs/manual backup.log.gz" 2>/dev/null)"
expect_file "current.log is untouched" logs/current.log "still writing"
expect_eq "app-0.log.gz is untouched" "old archive" "$(gzip -dc logs/app-0.log.gz 2>/dev/null)"
finish
