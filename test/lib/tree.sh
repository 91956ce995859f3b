# test/lib/tree.sh: copy the source tree into a root or a build dir (sourced, bash;
# test/deb, test/matrix, test/readme/run).
# shellcheck shell=bash
#
#   rl_copy_tree SRC DEST   copy SRC's files into DEST (made if missing): the files git
#                           tracks when SRC is a git checkout and git is there, else (a
#                           release tarball, a `git archive`) every file but .git and
#                           build or test products, so that a tree without .git works too

rl_copy_tree()
{
	local src=$1 dest=$2
	mkdir -p "$dest" || return 1
	if command -v git >/dev/null && git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
		git -C "$src" ls-files -z | (cd "$src" && xargs -0 cp --parents -t "$dest")
	else
		tar -C "$src" --exclude=./.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
			--exclude=./results --exclude=./tmp_check --exclude=./regression.diffs \
			--exclude=./regression.out --exclude=./log --exclude=./test/interop/node_modules \
			--exclude=./test/fuzz/build -cf - . | tar -C "$dest" -xf -
	fi
}
