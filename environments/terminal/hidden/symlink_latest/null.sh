# lexical order: v1.9.3 sorts after v1.10.1
ln -s "releases/$(ls releases | sort | tail -n 1)" current
