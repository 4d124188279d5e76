mkdir -p logs
for i in 1 2 3; do printf 'day %s\nline two\n' "$i" > "logs/app-$i.log"; done
printf 'still writing\n' > logs/current.log
printf 'old archive\n' | gzip -n > logs/app-0.log.gz
printf 'keep me\n' > logs/README
printf 'rotated by hand\n' > "logs/manual backup.log"
