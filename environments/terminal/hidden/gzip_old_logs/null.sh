# compresses current.log too
gzip logs/*.log
