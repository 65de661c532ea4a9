#!/bin/sh
# Regenerates tests/onnx_node_pass_list.txt: runs ONNX's node tests
# (libonnx-testdata) on kiln and records every passing "<test> <backend>".
#
#   tests/update_onnx_pass_list.sh [BUILD_DIR]      (default: build)
#
# Run it with the Vulkan device CI uses; review the diff before committing:
# a line that disappears is a regression.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac

meson compile -C "$build" test_onnx_node
# The same environment as `meson test` (tests/meson.build).
status=0
KILN_VULKAN_VALIDATION=fatal \
KILN_CACHE_DIR=$build/tests/kernel-cache \
KILN_SOURCE_ROOT=$root \
  "$build/tests/test_onnx_node" --update-pass-list --log_level=error --report_level=short || status=$?
if [ "$status" -ne 0 ]; then
  echo "update_onnx_pass_list.sh: test_onnx_node failed (status $status): the regressions above were" >&2
  echo "dropped from the list; review 'git diff tests/onnx_node_pass_list.txt'." >&2
fi
exit "$status"
