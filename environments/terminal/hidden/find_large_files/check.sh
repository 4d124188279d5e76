. "$CHECK_DIR/lib.sh"
want='data/Media/clip one.mp4
data/a.bin
data/c.bin
data/sub/d.dat
data/sub/deep/f.log'
expect_file "large_files.txt lists the files over 10240 bytes, sorted" large_files.txt "$want"
finish
