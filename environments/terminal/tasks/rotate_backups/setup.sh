mkdir -p backups
i=0
for name in db-c.bak db-a.bak "db b.bak" db-d.bak; do
  i=$((i + 1))
  echo "$name" > "backups/$name"
  touch -d "2024-01-0$i 10:00:00" "backups/$name"
done
echo keep > backups/README
