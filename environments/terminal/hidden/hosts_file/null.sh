# also drops bold.internal.example
grep -v 'old.internal' etc/hosts > etc/hosts.new && mv etc/hosts.new etc/hosts
echo '10.0.0.5 build.internal' >> etc/hosts
