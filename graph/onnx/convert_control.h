// ONNX control flow: If (a constant condition takes its branch's nodes; a
// run-time one keeps both branches as subgraphs), Loop and Scan (bodies as
// subgraphs), each run on the host by graph/ops/control.cpp.
#pragma once

#include "graph/onnx/convert_ops.h"

namespace kiln::onnx_import {

std::vector<graph::ValueId> convert_if(const OnnxNode& n, ImportContext& ctx);
std::vector<graph::ValueId> convert_loop(const OnnxNode& n, ImportContext& ctx);
std::vector<graph::ValueId> convert_scan(const OnnxNode& n, ImportContext& ctx);

}  // namespace kiln::onnx_import
