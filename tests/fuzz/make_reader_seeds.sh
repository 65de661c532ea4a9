#!/usr/bin/env bash
# Writes the seed corpora of the reader fuzzers (tests/fuzz/corpus/{npy,
# image,tuning_import,model_file,tokenizer}) with the kiln built in BUILD_DIR and
# Python's standard library; the JPEG seeds need Pillow (PyPI; the committed
# ones were made with pillow==10.4.0) and are skipped without it. Seeds stay
# small (libFuzzer runs with -max_len=65536).
#
#   tests/fuzz/make_reader_seeds.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: tests/fuzz/make_reader_seeds.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kiln="$build/tools/kiln"
corpus="$here/corpus"
work=$(mktemp -d -t kiln-seeds-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$corpus"/{npy,image,tuning_import,model_file,tokenizer}

python3 - "$corpus" <<'PY'
import pathlib, struct, sys, zlib

corpus = pathlib.Path(sys.argv[1])

def npy(descr, shape, payload):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload

seeds = {
    "f32_2x3.npy": npy("<f4", "(2, 3)", struct.pack("<6f", 1, -2, 3.5, 0, 5, 6)),
    "i64_4.npy": npy("<i8", "(4,)", struct.pack("<4q", 1, -1, 1 << 40, 7)),
    "f16_2x2.npy": npy("<f2", "(2, 2)", struct.pack("<4e", 1, -0.5, 2, 65504)),
    "bool_3.npy": npy("|b1", "(3,)", b"\x00\x01\x00"),
    "bf16_2.npy": npy("<V2", "(2,)", b"\x80\x3f\x00\xc0"),
    "scalar_i32.npy": npy("<i4", "()", struct.pack("<i", 16000)),
    "empty_f32.npy": npy("<f4", "(1, 0, 3)", b""),
}
for name, data in seeds.items():
    (corpus / "npy" / name).write_bytes(data)

def png(width, height, colour, channels, rows):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + rows(y) for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")

def bmp(width, height):
    row = bytes((x * 40) % 256 for x in range(width * 3))
    row += b"\x00" * ((4 - len(row) % 4) % 4)
    pixels = row * height
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + len(info) + len(pixels), 0, 0, 14 + len(info)) + info + pixels

images = {
    "rgb_8x8.png": png(8, 8, 2, 3, lambda y: bytes((x * 30 + y * 7) % 256 for x in range(24))),
    "grey_5x3.png": png(5, 3, 0, 1, lambda y: bytes(range(y, y + 5))),
    "rgba_4x4.png": png(4, 4, 6, 4, lambda y: bytes((x * 17) % 256 for x in range(16))),
    "rgb_3x2.bmp": bmp(3, 2),
    "rgb_2x2.ppm": b"P6\n2 2\n255\n" + bytes(range(12)),
    "grey_3x1.pgm": b"P5\n3 1\n255\n\x00\x80\xff",
}
for name, data in images.items():
    (corpus / "image" / name).write_bytes(data)
PY
python3 - "$corpus" <<'PY' || echo "no Pillow: JPEG seeds not written"
import pathlib, sys
from PIL import Image
image = Image.new("RGB", (8, 8))
image.putdata([(x * 30, y * 30, 128) for y in range(8) for x in range(8)])
out = pathlib.Path(sys.argv[1]) / "image"
image.save(out / "baseline_8x8.jpg", quality=80)
image.save(out / "progressive_8x8.jpg", quality=60, progressive=True)
image.convert("L").save(out / "grey_8x8.jpg", quality=90)
PY

# A tuning export of a few records: ResNet-18 at 32 px tuned for 10 s.
KILN_CACHE_DIR="$work/cache" "$kiln" tune --model resnet18 --image-size 32 --budget 10s --db "$work/tuning.db" > /dev/null
"$kiln" tune export --db "$work/tuning.db" -o "$work/export.json" > /dev/null
# The first records, the document under 32 KiB.
python3 - "$work/export.json" "$corpus/tuning_import/resnet18_32px.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
while len(json.dumps(doc, indent=2)) > 32 * 1024 and len(doc["records"]) > 1:
    doc["records"].pop()
open(sys.argv[2], "w").write(json.dumps(doc, indent=2) + "\n")
PY

# Compiled-model files of small models: an ONNX Runtime fixture's LSTM and
# its DFT, for Vulkan (SPIR-V) and the cpu backend.
for fixture in lstm_activations dft_onesided_axis2; do
  for target in vulkan cpu; do
    KILN_CACHE_DIR=off "$kiln" compile "$root/tests/fixtures/onnxruntime/$fixture/model.onnx" --target "$target" \
      -o "$corpus/model_file/${fixture}_$target.kiln" > /dev/null
  done
done
# Tokenizers: the fixtures' tokenizer.json files (GPT-2's ByteLevel, Llama 3's
# and Qwen2's Split regexes) written compactly, and a minimal one.
python3 - "$root/tests/fixtures/tokenizers" "$corpus/tokenizer" <<'PY'
import json, pathlib, sys
fixtures, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for name in ("gpt2", "llama3", "qwen2"):
    data = json.loads((fixtures / name / "tokenizer.json").read_text(encoding="utf-8"))
    (out / f"{name}.json").write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
minimal = {
    "version": "1.0", "added_tokens": [{"id": 3, "content": "<s>", "special": True, "single_word": False,
                                        "lstrip": False, "rstrip": False, "normalized": False}],
    "normalizer": None, "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
              "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
}
(out / "minimal.json").write_text(json.dumps(minimal, separators=(",", ":")), encoding="utf-8")
PY

ls -l "$corpus"/{npy,image,tuning_import,model_file,tokenizer}
