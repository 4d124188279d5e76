# only the top level
rm -f project/*.tmp project/*~
