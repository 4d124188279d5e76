# appending leaves "PermitRootLogin yes" first, which sshd would use
printf 'PermitRootLogin no\nPasswordAuthentication no\n' >> etc/ssh/sshd_config
