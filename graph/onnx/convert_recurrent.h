// ONNX's recurrent layers (LSTM, GRU, RNN) as an input projection and kiln's
// Recurrence op (graph/recurrence.h).
#pragma once

#include "graph/onnx/convert_ops.h"

namespace kiln::onnx_import {

std::vector<graph::ValueId> convert_lstm(const OnnxNode& n, ImportContext& ctx);
std::vector<graph::ValueId> convert_gru(const OnnxNode& n, ImportContext& ctx);
std::vector<graph::ValueId> convert_rnn(const OnnxNode& n, ImportContext& ctx);

}  // namespace kiln::onnx_import
