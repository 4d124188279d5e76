# replaces only the first occurrence on each line, and only at the top level
sed -i 's/db.old.internal/db.new.internal/' config/*.conf
