. "$CHECK_DIR/lib.sh"
expect_file "config_block.txt holds the first block's lines" config_block.txt 'hostname=edge-router-7
mtu=9000
# comment inside the block
vlan=12'
finish
