// ONNX's signal ops (opset 17): the window functions and MelWeightMatrix,
// folded to constants, and DFT and STFT as products with a constant basis.
#pragma once

#include "graph/onnx/convert_ops.h"

namespace kiln::onnx_import {

std::vector<graph::ValueId> convert_hann_window(const OnnxNode& n, ImportContext& ctx);
std::vector<graph::ValueId> convert_hamming_window(const OnnxNode& n, ImportContext& ctx);
std::vector<graph::ValueId> convert_blackman_window(const OnnxNode& n, ImportContext& ctx);
std::vector<graph::ValueId> convert_mel(const OnnxNode& n, ImportContext& ctx);
std::vector<graph::ValueId> convert_dft_op(const OnnxNode& n, ImportContext& ctx);
std::vector<graph::ValueId> convert_stft_op(const OnnxNode& n, ImportContext& ctx);

}  // namespace kiln::onnx_import
