#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_onnx_import (tests/fuzz/corpus/onnx_import).

Seeds: the model of one ONNX node test per operator type from Debian's
libonnx-testdata, and models whose initializers live in external data that
name the files fuzz_onnx_import puts in the model's folder (weights.bin,
sub/weights.bin, empty.bin, zero.bin -> /dev/zero, outside.bin -> a file
outside it) or paths leaving it. Needs the `onnx` Python package (PyPI) and
libonnx-testdata. Then models of the import paths node tests miss (a run-time
If, data-dependent shapes feeding TopK and ConstantOfShape, Einsum, DOUBLE
constants). The committed corpus was then minimised with libFuzzer's
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


def control_flow_seeds():
    """An If whose condition is an input (both branches become subgraphs,
    reading the enclosing graph's values), torchvision's data-dependent
    post-processing (NonZero, Shape, a run-time TopK K and ConstantOfShape),
    Einsum, a DOUBLE constant taken through a Cast, a Loop with a run-time
    Slice in its body, and a reverse Scan."""
    f = TensorProto.FLOAT

    def model(nodes, inputs, outputs, inits=()):
        graph = helper.make_graph(nodes, "seed", inputs, outputs, list(inits))
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()

    def branch(name, op):
        return helper.make_graph([helper.make_node(op, ["x"], [name + "_out"])], name, [],
                                 [helper.make_tensor_value_info(name + "_out", f, None)])
    x = helper.make_tensor_value_info("x", f, [2, 3])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", f, None)
    run_time_if = model([helper.make_node("If", ["cond"], ["y"], then_branch=branch("then", "Relu"),
                                          else_branch=branch("else", "Neg"))], [x, cond], [y])
    scores = helper.make_tensor_value_info("s", f, [10])
    post = model([
        helper.make_node("Greater", ["s", "t"], ["g"]), helper.make_node("NonZero", ["g"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["tr"], perm=[1, 0]), helper.make_node("GatherND", ["s", "tr"], ["sel"]),
        helper.make_node("Shape", ["sel"], ["sh"]), helper.make_node("Concat", ["c3", "sh"], ["cat"], axis=0),
        helper.make_node("ReduceMin", ["cat"], ["k"], keepdims=1), helper.make_node("TopK", ["sel", "k"], ["v", "i"]),
        helper.make_node("Shape", ["v"], ["vs"]),
        helper.make_node("ConstantOfShape", ["vs"], ["labels"],
                         value=helper.make_tensor("value", TensorProto.INT64, [1], [7]))],
        [scores], [helper.make_tensor_value_info(n, TensorProto.INT64 if n == "labels" else f, None)
                   for n in ("v", "labels")],
        [helper.make_tensor("t", f, [], [0.0]), helper.make_tensor("c3", TensorProto.INT64, [1], [3])])
    a = helper.make_tensor_value_info("a", f, [2, 3, 4])
    b = helper.make_tensor_value_info("b", f, [2, 4, 5])
    einsum = model([helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")], [a, b], [y])
    double = model([helper.make_node("Constant", [], ["d"], value=helper.make_tensor("v", TensorProto.DOUBLE, [3], [1.5, -2.5, 4.0])),
                    helper.make_node("Cast", ["d"], ["c"], to=f), helper.make_node("Mul", ["s3", "c"], ["y"])],
                   [helper.make_tensor_value_info("s3", f, [3])], [y])
    # A Loop with a trip count input, a condition from the body, a loop-carried
    # value, a captured value and a scan output; a Slice whose window is the
    # iteration number; a Scan summing rows in reverse.
    i64 = TensorProto.INT64
    loop_body = helper.make_graph(
        [helper.make_node("Less", ["i", "limit"], ["cond_out"]), helper.make_node("Add", ["acc", "x"], ["acc_out"]),
         helper.make_node("Unsqueeze", ["i", "zero"], ["start"]), helper.make_node("Add", ["start", "one"], ["end"]),
         helper.make_node("Slice", ["acc_out", "start", "end", "zero"], ["row"])],
        "body", [helper.make_tensor_value_info("i", i64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc", f, [2, 3])],
        [helper.make_tensor_value_info(n, f if n != "cond_out" else TensorProto.BOOL, None)
         for n in ("cond_out", "acc_out", "row")])
    loop = model([helper.make_node("Loop", ["trips", "", "x"], ["acc_final", "rows"], body=loop_body)],
                 [x, helper.make_tensor_value_info("trips", i64, [])],
                 [helper.make_tensor_value_info(n, f, None) for n in ("acc_final", "rows")],
                 [helper.make_tensor("limit", i64, [], [1]), helper.make_tensor("zero", i64, [1], [0]),
                  helper.make_tensor("one", i64, [1], [1])])
    scan_body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "r"], ["sum_out"]), helper.make_node("Identity", ["sum_out"], ["each"])],
        "scan_body", [helper.make_tensor_value_info("sum_in", f, [3]), helper.make_tensor_value_info("r", f, [3])],
        [helper.make_tensor_value_info(n, f, [3]) for n in ("sum_out", "each")])
    scan = model([helper.make_node("Scan", ["init", "x"], ["total", "running"], body=scan_body, num_scan_inputs=1,
                                   scan_input_directions=[1])],
                 [helper.make_tensor_value_info("init", f, [3]), x],
                 [helper.make_tensor_value_info(n, f, None) for n in ("total", "running")])
    return [run_time_if, post, einsum, double, loop, scan]


def main():
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus/onnx_import")
    out.mkdir(parents=True, exist_ok=True)
    seeds = node_test_seeds() + external_seeds() + control_flow_seeds()
    for data in seeds:
        (out / hashlib.sha1(data).hexdigest()).write_bytes(data)
    print(f"{len(seeds)} seeds in {out}")


if __name__ == "__main__":
    main()
