awk '{ for (i = 2; i <= NF; i++) if ($i == "old.internal") next; print }' etc/hosts > etc/hosts.new
echo '10.0.0.5 build.internal' >> etc/hosts.new
mv etc/hosts.new etc/hosts
# ---
cat etc/hosts
