. "$CHECK_DIR/lib.sh"
f=etc/ssh/sshd_config
active() { grep -E "^[[:space:]]*$1([[:space:]]|$)" "$f"; }
expect_eq "one active PermitRootLogin line, set to no" "PermitRootLogin no" "$(active PermitRootLogin | sed 's/[[:space:]]\+/ /g; s/ $//')"
expect_eq "one active PasswordAuthentication line, set to no" "PasswordAuthentication no" "$(active PasswordAuthentication | sed 's/[[:space:]]\+/ /g; s/ $//')"
expect_eq "the other lines are unchanged" '# sshd_config
Include /etc/ssh/sshd_config.d/*.conf
Port 22
PubkeyAuthentication yes
ChallengeResponseAuthentication no
UsePAM yes
X11Forwarding yes
PrintMotd no
AcceptEnv LANG LC_*
Subsystem sftp /usr/lib/openssh/sftp-server' "$(grep -v -E '^[[:space:]]*#?[[:space:]]*(PermitRootLogin|PasswordAuthentication)([[:space:]]|$)' "$f")"
finish
