mkdir -p project/src/util project/docs project/build.tmp
printf 'int main;\n' > project/src/main.c
printf 'old\n' > project/src/main.c~
printf 'x\n' > project/src/util/helper.c
printf 'x\n' > project/src/util/helper.c~
printf 'scratch\n' > project/src/util/scratch.tmp
printf 'tmp\n' > project/cache.tmp
printf 'template\n' > project/config.tmpl
printf 'doc\n' > project/docs/guide.md
printf 'doc\n' > project/docs/.guide.md.tmp
printf 'keep\n' > project/build.tmp/output.bin
printf 'tilde in the middle\n' > project/docs/notes~old.txt
