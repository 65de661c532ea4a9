#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_onnx_import (tests/fuzz/corpus/onnx_import).

Seeds: the model of one ONNX node test per operator type from Debian's
libonnx-testdata, and models whose initializers live in external data that
name the files fuzz_onnx_import puts in the model's folder (weights.bin,
sub/weights.bin, empty.bin, zero.bin -> /dev/zero, outside.bin -> a file
outside it) or paths leaving it. Needs the `onnx` Python package (PyPI) and
libonnx-testdata. The committed corpus was then minimised with libFuzzer's
-merge=1 (see tests/README.md).
"""
import hashlib
import pathlib
import sys

import onnx
from onnx import TensorProto, helper

NODE_TESTS = pathlib.Path("/usr/share/libonnx-testdata/data/node")


def node_test_seeds():
    seen = {}
    for model_path in sorted(NODE_TESTS.glob("*/model.onnx")):
        model = onnx.load(str(model_path), load_external_data=False)
        ops = tuple(sorted({n.op_type for n in model.graph.node}))
        seen.setdefault(ops, model_path.read_bytes())
    return list(seen.values())


def external_model(location, offset=None, length=None, dims=(4,), dtype=TensorProto.FLOAT):
    weight = TensorProto()
    weight.name = "w"
    weight.data_type = dtype
    weight.dims.extend(dims)
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = weight.external_data.add()
            entry.key, entry.value = key, str(value)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(dims))
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "external", [x], [y], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return model.SerializeToString()


def external_seeds():
    return [
        external_model("weights.bin"),
        external_model("weights.bin", offset=64, length=16),
        external_model("weights.bin", offset=4080, length=16),
        external_model("weights.bin", offset=4095, length=16),
        external_model("weights.bin", dims=(2, 3, 8, 8)),
        external_model("weights.bin", dims=(16,), dtype=TensorProto.INT64),
        external_model("sub/weights.bin", length=16),
        external_model("empty.bin"),
        external_model("zero.bin", length=16),
        external_model("outside.bin"),
        external_model("../weights.bin"),
        external_model("/etc/hostname"),
        external_model("weights.bin", offset="9999999999999999999", length=16),
        external_model("weights.bin", offset=-1),
    ]


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus/onnx_import")
    out.mkdir(parents=True, exist_ok=True)
    seeds = node_test_seeds() + external_seeds()
    for data in seeds:
        (out / hashlib.sha1(data).hexdigest()).write_bytes(data)
    print(f"{len(seeds)} seeds in {out}")


if __name__ == "__main__":
    main()
