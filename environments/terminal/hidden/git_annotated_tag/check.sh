. "$CHECK_DIR/lib.sh"
r=repo
expect_eq "v1.2.0 is an annotated tag" tag "$(git_in $r cat-file -t v1.2.0)"
expect_eq "v1.2.0 tags 'Bump version to 1.2.0'" e7be0911cd5560fa191b0a0996001b1bd8e31cc6 "$(git_in $r rev-parse 'v1.2.0^{commit}')"
expect_eq "its message is 'Release 1.2.0'" "Release 1.2.0" "$(git_in $r for-each-ref refs/tags/v1.2.0 --format='%(contents)')"
expect_eq "main is unchanged" b80d73a1fb52505ee43db396bcb4cbe3664b8325 "$(git_in $r rev-parse main)"
expect_eq "v1.1.0 is still there" 332da33dce0047724963640012ed05b8aaac66e4 "$(git_in $r rev-parse 'v1.1.0^{commit}')"
finish
