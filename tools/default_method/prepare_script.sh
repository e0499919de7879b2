#!/usr/bin/env bash
# The third-party script of the default-method study, copied from a checkout of pytorch/examples
# (commit 77f55b912142e11fcfdf5b530231fb9c52f181e8) into .carry/word_language_model, which is
# git-ignored and travels to the GPU machine in the device call's carry (its code is not committed
# here). word_language_model/main.py, model.py and data.py as they are; its data, Wikitext-2,
# from the same commit: valid.txt and test.txt as they are, and for train.txt (absent from the
# mirror this was taken from) the validation and test text four times over, about the size of
# Wikitext-2's own training split (9.5 MB against 10.8 MB), so an epoch has a real epoch's length.
#   bash tools/default_method/prepare_script.sh PATH_TO_PYTORCH_EXAMPLES_GIT
set -euo pipefail
src=${1:?usage: prepare_script.sh PATH_TO_PYTORCH_EXAMPLES_GIT}
commit=77f55b912142e11fcfdf5b530231fb9c52f181e8
dest=.carry/word_language_model
mkdir -p "$dest/data/wikitext-2"
for f in main.py model.py data.py; do git -C "$src" show "$commit:word_language_model/$f" > "$dest/$f"; done
for f in valid.txt test.txt README; do
  git -C "$src" show "$commit:word_language_model/data/wikitext-2/$f" > "$dest/data/wikitext-2/$f"
done
for _ in 1 2 3 4; do cat "$dest/data/wikitext-2/valid.txt" "$dest/data/wikitext-2/test.txt"; done > "$dest/data/wikitext-2/train.txt"
echo "$commit" > "$dest/COMMIT"
ls -la "$dest" "$dest/data/wikitext-2"
