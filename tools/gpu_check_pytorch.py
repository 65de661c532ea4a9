#!/usr/bin/env python3
"""PyTorch's side of tools/gpu-check.sh: times torchvision's version of each
kiln built-in model in PyTorch eager and torch.compile (default and
reduce-overhead, and max-autotune with --max-autotune) on the GPU with kiln
bench's method (warm-up calls, then the mean and median of timed calls, each
call synchronised), and writes one markdown table beside kiln bench's
figures read from its bench.csv. Precision: PyTorch's defaults, which are
kiln's (convolutions may use TF32, matrix products stay f32). With
--gemm-size N, also torch.matmul of two N x N matrices in f32, TF32 and f16
(CUDA events, median), for tools/bench/gemm_bench.cpp's figures.

Usage: gpu_check_pytorch.py --kiln-csv DIR/bench.csv --models resnet50,... \
           --batch 1,16 --iters 100 --warmup 10 [--max-autotune] [--gemm-size 4096] --out table.md
"""
import argparse
import csv
import statistics
import sys
import time


def torchvision_model(name):
    import torchvision.models as tv
    import torchvision.models.segmentation as seg
    import torchvision.models.detection as det
    if hasattr(tv, name):
        return getattr(tv, name)(weights=None)
    if hasattr(seg, name):
        return getattr(seg, name)(weights=None, weights_backbone=None, aux_loss=False)
    if hasattr(det, name):
        return getattr(det, name)(weights=None, weights_backbone=None)
    raise KeyError(name)


def time_calls(fn, x, iters, warmup):
    import torch
    for _ in range(warmup):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.mean(times), statistics.median(times)


def pytorch_rows(models, batches, iters, warmup, compile_batches, max_autotune):
    import torch
    torch.backends.cudnn.benchmark = True
    rows = []
    for name in models:
        try:
            model = torchvision_model(name).eval().cuda()
        except KeyError:
            print(f"pytorch: {name} is not a torchvision model; skipped", file=sys.stderr)
            continue
        size = 320 if name.startswith("ssdlite320") else 224
        for batch in batches:
            x = torch.randn(batch, 3, size, size, device="cuda")
            modes = [("eager", model)]
            if batch in compile_batches:
                modes += [("torch.compile", torch.compile(model)),
                          ("torch.compile reduce-overhead", torch.compile(model, mode="reduce-overhead"))]
                if max_autotune:
                    modes.append(("torch.compile max-autotune", torch.compile(model, mode="max-autotune")))
            for mode, fn in modes:
                with torch.inference_mode():
                    try:
                        start = time.perf_counter()
                        fn(x)
                        torch.cuda.synchronize()
                        first = (time.perf_counter() - start) * 1000.0
                        mean, median = time_calls(fn, x, iters, warmup)
                        rows.append(dict(model=name, batch=batch, mode=mode, mean=mean, median=median, first=first))
                        print(f"pytorch {name} b{batch} {mode}: mean {mean:.3f} ms, median {median:.3f} ms, "
                              f"first call {first:.0f} ms", flush=True)
                    except Exception as error:  # one mode failing must not lose the others
                        print(f"pytorch {name} b{batch} {mode}: failed: {error}", file=sys.stderr, flush=True)
            torch._dynamo.reset()
    return rows


def gemm_rows(size, iters, warmup):
    """torch.matmul of two size x size matrices per precision: (precision, median ms, TFLOP/s)."""
    import torch
    rows = []
    for precision, dtype, tf32 in (("f32", torch.float32, False), ("tf32", torch.float32, True),
                                   ("f16", torch.float16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(size, size, device="cuda", dtype=dtype)
        b = torch.randn(size, size, device="cuda", dtype=dtype)
        for _ in range(warmup):
            torch.matmul(a, b)
        times = []
        for _ in range(iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.matmul(a, b)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        median = statistics.median(times)
        rows.append((precision, median, 2.0 * size ** 3 / (median * 1e-3) / 1e12))
        print(f"pytorch matmul {size}^3 {precision}: median {median:.4f} ms", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    return rows


def kiln_rows(path):
    rows = []
    try:
        with open(path) as f:
            for r in csv.DictReader(f):
                if r.get("status") != "ok":
                    continue
                rows.append(dict(model=r["model"], batch=int(r["batch"]), mode="kiln " + r["mode"],
                                 mean=float(r["mean_ms"]), median=float(r["median_ms"]),
                                 first=float(r["first_call_ms"] or 0)))
    except OSError as error:
        print(f"no kiln figures: {error}", file=sys.stderr)
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kiln-csv", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--batch", default="1")
    p.add_argument("--compile-batch", default="1", help="batches torch.compile is timed at (each compiles anew)")
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--max-autotune", action="store_true", help="also torch.compile mode=max-autotune (minutes per model)")
    p.add_argument("--gemm-size", type=int, default=0, help="also time torch.matmul of two N x N matrices")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    models = a.models.split(",")
    batches = [int(b) for b in a.batch.split(",")]
    compile_batches = [int(b) for b in a.compile_batch.split(",")]

    import torch
    rows = kiln_rows(a.kiln_csv) + pytorch_rows(models, batches, a.iters, a.warmup, compile_batches, a.max_autotune)
    gemms = gemm_rows(a.gemm_size, a.iters, a.warmup) if a.gemm_size > 0 else []
    with open(a.out, "w") as out:
        out.write(f"Device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; "
                  f"{a.iters} timed calls after {a.warmup} warm-up calls, each call synchronised; "
                  f"inputs random (PyTorch) or the bench image (kiln), same shapes.\n\n")
        out.write("| model | batch | mode | mean ms | median ms | first call ms | vs PyTorch eager (median) |\n")
        out.write("| --- | --- | --- | --- | --- | --- | --- |\n")
        for name in models:
            for batch in batches:
                cell = [r for r in rows if r["model"] == name and r["batch"] == batch]
                eager = next((r["median"] for r in cell if r["mode"] == "eager"), None)
                for r in cell:
                    ratio = f"{eager / r['median']:.2f}x" if eager else ""
                    out.write(f"| {name} | {batch} | {r['mode']} | {r['mean']:.3f} | {r['median']:.3f} | "
                              f"{r['first']:.0f} | {ratio} |\n")
        if gemms:
            out.write(f"\ntorch.matmul, {a.gemm_size}^3, median of {a.iters} (CUDA events):\n\n")
            out.write("| precision | ms | TFLOP/s |\n| --- | --- | --- |\n")
            for precision, median, tflops in gemms:
                out.write(f"| {precision} | {median:.4f} | {tflops:.1f} |\n")
    print(open(a.out).read())


if __name__ == "__main__":
    main()
