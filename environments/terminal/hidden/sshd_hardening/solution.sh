sed -i 's/^PermitRootLogin .*/PermitRootLogin no/; s/^#PasswordAuthentication .*/PasswordAuthentication no/' etc/ssh/sshd_config
# ---
grep -E 'PermitRootLogin|PasswordAuthentication' etc/ssh/sshd_config
