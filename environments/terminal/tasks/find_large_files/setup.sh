mkdir -p data/sub/deep data/Media
head -c 20000 /dev/zero > data/a.bin
head -c 10240 /dev/zero > data/b.bin
head -c 10241 /dev/zero > data/c.bin
head -c 50000 /dev/zero > data/sub/d.dat
head -c 100 /dev/zero > data/sub/e.txt
head -c 1048577 /dev/zero > data/sub/deep/f.log
head -c 10000 /dev/zero > data/sub/deep/g.log
head -c 30000 /dev/zero > "data/Media/clip one.mp4"
: > data/empty
