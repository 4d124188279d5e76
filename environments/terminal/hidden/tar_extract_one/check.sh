. "$CHECK_DIR/lib.sh"
expect_file "restored/app.yaml has the archived content" restored/app.yaml 'name: billing
replicas: 3
region: eu-west-1'
expect_eq "nothing else was extracted" 'backup.tar.gz
restored/app.yaml' "$(file_list .)"
finish
