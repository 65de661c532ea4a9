#include "graph/hf/layers.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <cmath>
#include <limits>
#include <numbers>

namespace kiln::hf {
namespace {

Attributes attrs(std::initializer_list<std::pair<const char*, Attribute>> list) {
  Attributes a;
  for (const auto& [name, value] : list) a.set(name, value);
  return a;
}

Value one(Builder& b, const std::string& op, std::vector<std::optional<Value>> inputs, const Attributes& a = {}) {
  return b.op(op, inputs, a).at(0);
}

// ONNX's TensorProto code for the float types Cast takes.
std::int64_t onnx_float_code(DType dtype) {
  switch (dtype) {
    case DType::f32: return 1;
    case DType::f16: return 10;
    case DType::bf16: return 16;
    default: break;
  }
  throw_error(ErrorKind::Internal, "hf::cast to " + std::string(dtype_name(dtype)));
}

Value slice_last(Builder& b, Value x, std::int64_t begin, std::int64_t end) {
  return one(b, "Slice", {x},
             attrs({{"starts", std::vector<std::int64_t>{begin}}, {"ends", std::vector<std::int64_t>{end}},
                    {"axes", std::vector<std::int64_t>{-1}}}));
}

}  // namespace

Value scalar(Builder& b, const std::string& name, double value, DType dtype) {
  return b.constant(name, Tensor::scalar_f32(static_cast<float>(value)).to(dtype));
}

Value cast(Builder& b, Value x, DType to) {
  if (b.dtype(x) == to) return x;
  return one(b, "Cast", {x}, attrs({{"to", onnx_float_code(to)}}));
}

Value linear(Builder& b, Value x, Value weight, std::optional<Value> bias, bool in_out) {
  const Shape shape = b.shape(x);
  const Shape w = b.shape(weight);
  const std::int64_t out = in_out ? w[1] : w[0];
  const std::int64_t in = shape.back();
  Value rows = b.reshape(x, {-1, in});
  Value y = b.gemm(rows, weight, bias, {.trans_b = !in_out});
  Shape result = shape;
  result.back() = out;
  return b.reshape(y, result);
}

namespace {
Value normalised_f32(Builder& b, Value x, double epsilon) {
  Value x32 = cast(b, x, DType::f32);
  Value mean = one(b, "ReduceMean", {b.mul(x32, x32)},
                   attrs({{"axes", std::vector<std::int64_t>{-1}}, {"keepdims", std::int64_t{1}}}));
  Value eps = scalar(b, "epsilon", epsilon, DType::f32);
  Value r = one(b, "Reciprocal", {one(b, "Sqrt", {b.add(mean, eps)})});
  return b.mul(x32, r);
}
}  // namespace

Value rms_norm(Builder& b, Value x, Value weight, double epsilon) {
  return b.mul(weight, cast(b, normalised_f32(b, x, epsilon), b.dtype(x)));
}

Value rms_norm_one_plus(Builder& b, Value x, Value one_plus_weight, double epsilon) {
  return cast(b, b.mul(normalised_f32(b, x, epsilon), one_plus_weight), b.dtype(x));
}

bool is_known_activation(const std::string& name) {
  return name == "silu" || name == "gelu" || name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "relu";
}

Value activation(Builder& b, Value x, const std::string& name) {
  if (name == "silu") return one(b, "Silu", {x});
  if (name == "gelu") return b.gelu(x, false);
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return b.gelu(x, true);
  if (name == "relu") return b.relu(x);
  throw_error(ErrorKind::Unsupported, "activation '" + name + "' (kiln has silu, gelu, gelu_new, gelu_pytorch_tanh, relu)");
}

RotaryTables rotary_tables(std::int64_t max_positions, std::int64_t head_dim, double theta, DType dtype,
                           const std::optional<Llama3RopeScaling>& scaling) {
  KILN_CHECK(head_dim % 2 == 0, ErrorKind::Unsupported, "rotary embeddings need an even head_dim, not " + std::to_string(head_dim));
  const std::int64_t half = head_dim / 2;
  // As transformers: inv_freq = 1 / theta^(2i / d) in f32, freqs = position * inv_freq in f32.
  std::vector<float> inv_freq(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i)
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(head_dim));
  if (scaling) {
    // In f32, in transformers' order of operations (its tensors are f32, its constants Python floats).
    const float factor = static_cast<float>(scaling->factor);
    const float low = static_cast<float>(scaling->low_freq_factor);
    const float spread = static_cast<float>(scaling->high_freq_factor - scaling->low_freq_factor);
    const float original = static_cast<float>(scaling->original_max_positions);
    const float low_freq_wavelen = static_cast<float>(scaling->original_max_positions / scaling->low_freq_factor);
    const float high_freq_wavelen = static_cast<float>(scaling->original_max_positions / scaling->high_freq_factor);
    for (float& freq : inv_freq) {
      const float wavelen = static_cast<float>(2.0 * std::numbers::pi) / freq;
      if (wavelen < high_freq_wavelen) continue;
      if (wavelen > low_freq_wavelen) {
        freq = freq / factor;
        continue;
      }
      const float smooth = (original / wavelen - low) / spread;
      freq = (1.0f - smooth) * freq / factor + smooth * freq;
    }
  }
  std::vector<float> cos(static_cast<std::size_t>(max_positions * head_dim)), sin(cos.size());
  for (std::int64_t p = 0; p < max_positions; ++p)
    for (std::int64_t i = 0; i < head_dim; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i % half];
      cos[p * head_dim + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin[p * head_dim + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  return {Tensor::from_f32({max_positions, head_dim}, std::move(cos)).to(dtype),
          Tensor::from_f32({max_positions, head_dim}, std::move(sin)).to(dtype)};
}

Value apply_rotary(Builder& b, Value x, Value cos, Value sin) {
  const std::int64_t d = b.shape(x).back();
  Value rotated = b.concat({b.op("Neg", {slice_last(b, x, d / 2, d)}, {}).at(0), slice_last(b, x, 0, d / 2)}, -1);
  return b.add(b.mul(x, cos), b.mul(rotated, sin));
}

namespace {
// torch.finfo(dtype).min: what transformers puts in a mask.
float lowest_of(DType dtype) {
  return dtype == DType::f16    ? -65504.0f
         : dtype == DType::bf16 ? -3.3895313892515355e38f
                                : std::numeric_limits<float>::lowest();
}

Tensor range(std::int64_t n) {
  std::vector<std::int64_t> values(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) values[i] = i;
  return Tensor::from_i64({n}, std::move(values));
}

Tensor i64_scalar(std::int64_t value) { return Tensor::from_i64({}, {value}); }
}  // namespace

Value step_positions(Builder& b, Value position, std::int64_t query_length) {
  return b.add(position, b.constant("query_offsets", range(query_length)));
}

Value gather_rows(Builder& b, Value table, Value positions) {
  return one(b, "Gather", {table, positions}, attrs({{"axis", std::int64_t{0}}}));
}

Value write_cache(Builder& b, Value past, Value update, Value write_indices) {
  return one(b, "TensorScatter", {past, update, write_indices}, attrs({{"axis", std::int64_t{2}}}));
}

Value step_mask(Builder& b, Value slots, Value attention_mask, DType dtype, std::optional<std::int64_t> sliding_window) {
  const std::int64_t query_length = b.shape(slots)[0];
  const Shape m = b.shape(attention_mask);
  const std::int64_t batch = m[0], cache_length = m[1];
  Value keys = b.constant("mask.rows", range(cache_length).reshaped({1, cache_length}));
  Value query_slots = b.reshape(slots, {query_length, 1});
  Value visible = one(b, "LessOrEqual", {keys, query_slots});
  if (sliding_window) {
    Value oldest = b.sub(query_slots, b.constant("mask.window", i64_scalar(*sliding_window)));
    visible = one(b, "And", {visible, one(b, "GreaterOrEqual", {keys, oldest})});
  }
  Value causal = b.reshape(visible, {1, 1, query_length, cache_length});
  Value filled = b.reshape(one(b, "Greater", {attention_mask, b.constant("mask.padding", i64_scalar(0))}),
                           {batch, 1, 1, cache_length});
  return one(b, "Where", {one(b, "And", {causal, filled}), b.constant("mask.open", Tensor::scalar_f32(0.0f).to(dtype)),
                          b.constant("mask.closed", Tensor::scalar_f32(lowest_of(dtype)).to(dtype))});
}

StepCache::StepCache(Builder& b, std::int64_t batch, std::int64_t query_length, std::int64_t cache_length,
                     std::int64_t layers, std::int64_t kv_heads, std::int64_t head_dim, DType dtype)
    : b_(b) {
  ids = b.input("input_ids", DType::i64, {batch, query_length});
  position = b.input("position", DType::i64, {1});
  position_ids = b.input("position_ids", DType::i64, {batch, query_length});
  attention_mask = b.input("attention_mask", DType::i64, {batch, cache_length});
  for (std::int64_t layer = 0; layer < layers; ++layer)
    for (const char* part : {"key", "value"})
      past_.push_back(b.input("past." + std::to_string(layer) + "." + part, dtype, {batch, kv_heads, cache_length, head_dim}));
  present_.resize(past_.size());
  slots_ = step_positions(b, position, query_length);
  write_indices_ = batch == 1 ? position : one(b, "Expand", {position}, attrs({{"shape", std::vector<std::int64_t>{batch}}}));
}

std::pair<Value, Value> StepCache::write(std::int64_t layer, Value k, Value v) {
  const auto i = static_cast<std::size_t>(2 * layer);
  present_[i] = write_cache(b_, past_[i], k, write_indices_);
  present_[i + 1] = write_cache(b_, past_[i + 1], v, write_indices_);
  return {present_[i], present_[i + 1]};
}

Model StepCache::build(Value logits) {
  Value last = last_position(b_, logits);
  b_.set_name(last, "logits");
  std::vector<Value> outputs = {last};
  for (std::size_t i = 0; i < present_.size(); ++i) {
    b_.set_name(present_[i], "present." + std::to_string(i / 2) + (i % 2 == 0 ? ".key" : ".value"));
    outputs.push_back(present_[i]);
  }
  return b_.build(outputs);
}

Value last_position(Builder& b, Value x) {
  const Shape s = b.shape(x);
  Value last = one(b, "Slice", {x},
                   attrs({{"starts", std::vector<std::int64_t>{s[1] - 1}}, {"ends", std::vector<std::int64_t>{s[1]}},
                          {"axes", std::vector<std::int64_t>{1}}}));
  return b.reshape(last, {s[0], s[2]});
}

Tensor causal_mask(std::int64_t length, DType dtype, std::optional<std::int64_t> sliding_window) {
  const float lowest = lowest_of(dtype);
  std::vector<float> mask(static_cast<std::size_t>(length * length), 0.0f);
  for (std::int64_t q = 0; q < length; ++q)
    for (std::int64_t k = 0; k < length; ++k)
      if (k > q || (sliding_window && k < q - *sliding_window)) mask[q * length + k] = lowest;
  return Tensor::from_f32({1, 1, length, length}, std::move(mask)).to(dtype);
}

Value split_heads(Builder& b, Value x, std::int64_t heads, std::int64_t head_dim) {
  const Shape s = b.shape(x);
  return b.transpose(b.reshape(x, {s[0], s[1], heads, head_dim}), {0, 2, 1, 3});
}

Value merge_heads(Builder& b, Value x) {
  const Shape s = b.shape(x);
  return b.reshape(b.transpose(x, {0, 2, 1, 3}), {s[0], s[2], s[1] * s[3]});
}

Value attention(Builder& b, Value q, Value k, Value v, Value mask, Value divisor, bool softmax_in_f32) {
  const DType dtype = b.dtype(q);
  Value products = b.matmul(q, b.transpose(k, {0, 1, 3, 2}));
  Value scaled = b.dtype(divisor) == dtype ? b.div(products, divisor)
                                           : cast(b, b.div(cast(b, products, DType::f32), divisor), dtype);
  Value scores = b.add(scaled, mask);
  Value probabilities = softmax_in_f32 ? cast(b, b.softmax(cast(b, scores, DType::f32), -1), dtype) : b.softmax(scores, -1);
  return b.matmul(probabilities, v);
}

Value grouped_attention(Builder& b, Value q, Value k, Value v, Value mask, Value divisor, bool softmax_in_f32) {
  const Shape qs = b.shape(q);
  const std::int64_t kv_heads = b.shape(k)[1], repeats = qs[1] / kv_heads;
  if (repeats == 1) return attention(b, q, k, v, mask, divisor, softmax_in_f32);
  // Query head h is group h / repeats, row (h % repeats) * Lq + i: the same
  // memory viewed, as the heads of a group are adjacent.
  Value grouped = b.reshape(q, {qs[0], kv_heads, repeats * qs[2], qs[3]});
  // Row j * Lq + i of a group takes the mask's row i ([1 or B, 1, Lq, L]).
  if (qs[2] > 1) mask = one(b, "Tile", {mask}, attrs({{"repeats", std::vector<std::int64_t>{1, 1, repeats, 1}}}));
  return b.reshape(attention(b, grouped, k, v, mask, divisor, softmax_in_f32), qs);
}

}  // namespace kiln::hf
