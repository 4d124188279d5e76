# git rm without --cached deletes the files from disk
cd repo && git rm -r -q secrets.env node_modules && printf 'secrets.env\nnode_modules/\n' >> .gitignore && git add .gitignore && git commit -q -m "Stop tracking local files"
