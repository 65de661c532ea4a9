#!/usr/bin/env bash
# Packs a built kiln for tools/gpu-check.sh on a machine that has a GPU but
# not kiln's build dependencies: the kiln binary, its tuning worker and the
# test programs gpu-check runs, stripped, with the shared libraries they need that a plain
# Linux install lacks (Boost.Test, shaderc, protobuf, ONNX, ...; not glibc,
# libstdc++ or any GPU driver, which must come from the machine itself).
#
# Usage: tools/gpu-bundle.sh BUILD_DIR DEST
# Then on the GPU machine: tools/gpu-check.sh --prebuilt DEST
set -euo pipefail
build="$1" dest="$2"
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib"
for f in tools/kiln tools/generate_bench tools/gemm_bench src/kiln-tune-worker tests/test_backend_conformance tests/test_conformance tests/test_zoo \
  tests/test_resnet tests/test_pytorch_fixtures tests/test_attention tests/test_winograd tests/test_runtime; do
  strip -o "$dest/bin/$(basename "$f")" "$build/$f"
done
# What the machine's own loader and C++ runtime provide.
system='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.'
for f in "$dest"/bin/*; do
  ldd "$f" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $system ]] || cp -L "$path" "$dest/lib/$name"
done
# The Vulkan loader too, so that kiln lists a GPU's Vulkan driver where one is installed.
loader=$(ldconfig -p | awk '/libvulkan.so.1 / {print $NF; exit}')
[ -n "$loader" ] && cp -L "$loader" "$dest/lib/"
strip --strip-unneeded "$dest"/lib/* 2>/dev/null || true
git -C "$(dirname "$0")/.." describe --always --dirty > "$dest/VERSION" 2>/dev/null || echo unknown > "$dest/VERSION"
du -sh "$dest"
