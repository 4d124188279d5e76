grep -rl 'db.old.internal' config
# ---
find config -type f -name '*.conf' -exec sed -i 's/db\.old\.internal/db.new.internal/g' {} +
