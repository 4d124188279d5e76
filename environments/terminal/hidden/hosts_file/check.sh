. "$CHECK_DIR/lib.sh"
expect_file "etc/hosts: old.internal gone, build.internal added once at the end" etc/hosts '127.0.0.1 localhost
::1 localhost ip6-localhost
10.0.0.2 db.internal
10.0.0.4 cache.internal
10.0.0.10 bold.internal.example
10.0.0.5 build.internal'
finish
