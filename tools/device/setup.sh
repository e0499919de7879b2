# Sourced at the start of every script run on the GPU machine (tools/device/*.sh),
# from the repository root: wheels the GPU image lacks (.whl/*.whl, if any), then the package, offline.
# The image lacks pydantic (with pydantic_core, annotated_types, typing_extensions, typing_inspection),
# google-re2 and filelock: download them for CPython 3.12 manylinux into .whl/ (git-ignored) as
# ../.library/device/README.md says, and name .whl in the call's carry.
# The scripts write what must come back to the folder named by $OUT.
set -e
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null
export PYTHONUNBUFFERED=1
set +e
