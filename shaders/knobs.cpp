#include "shaders/knobs.h"

#include "shaders/attention_template.h"
#include "shaders/conv_template.h"
#include "src/kernel/ir.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <charconv>
#include <optional>
#include <span>
#include <vector>

namespace kiln::shaders {

namespace {

constexpr std::uint32_t kMaxGemmTile = 16;  // GEMM register blocks: 16 columns on CPU devices
constexpr std::uint32_t kMaxConvTile = 8;
constexpr std::uint32_t kMaxUnroll = 8;
constexpr std::uint32_t kMaxWorkgroup = 1024;
constexpr std::uint32_t kMaxPanel = 64;
constexpr std::uint32_t kMaxSharedKTile = 32;
constexpr std::uint32_t kMaxSharedStages = 2;
// A lane of a subgroup GEMM may own 64 columns: lavapipe's fastest SGEMM
// keeps an 8 x 64 block per lane (its registers spill cheaply to L1).
constexpr std::uint32_t kMaxSubgroupGemmTileN = 64;
constexpr std::uint32_t kMaxSubgroupLanes = 64;

void check_range(const char* what, std::uint32_t value, std::uint32_t max, const std::string& knobs) {
  KILN_CHECK(value >= 1 && value <= max, ErrorKind::Internal,
             std::string("template knob ") + what + " = " + std::to_string(value) + " is outside [1, " +
                 std::to_string(max) + "] (knobs " + knobs + ")");
}

}  // namespace

const char* conv_algorithm_name(ConvAlgorithm algorithm) {
  switch (algorithm) {
    case ConvAlgorithm::gemm_1x1: return "gemm_1x1";
    case ConvAlgorithm::direct: return "direct";
    case ConvAlgorithm::implicit_gemm: return "implicit_gemm";
    case ConvAlgorithm::depthwise: return "depthwise";
  }
  return "unknown";
}

namespace {

// One numeric knob in the text form: "_<prefix><value>". A field with
// `omitted_when` is printed only when its value differs (and takes that value
// when absent); the others are always printed and required. A new knob is one
// line in its table.
template <class Knobs>
struct KnobField {
  const char* name;    // the member's name, for errors
  const char* prefix;  // in the text
  std::uint32_t Knobs::*member;
  std::optional<std::uint32_t> omitted_when;
};

constexpr KnobField<GemmKnobs> kGemmFields[] = {
    {"k_unroll", "k", &GemmKnobs::k_unroll, std::nullopt},
    {"panel_width", "p", &GemmKnobs::panel_width, std::nullopt},
    {"workgroup_size", "wg", &GemmKnobs::workgroup_size, std::nullopt},
    {"vector_width", "v", &GemmKnobs::vector_width, std::nullopt},
    {"shared_k_tile", "s", &GemmKnobs::shared_k_tile, 0},
    {"split_k", "sk", &GemmKnobs::split_k, 1},
    {"shared_stages", "st", &GemmKnobs::shared_stages, 1},
    {"workgroup_n", "wn", &GemmKnobs::workgroup_n, 0},
    {"subgroup_broadcast", "sg", &GemmKnobs::subgroup_broadcast, 0},
};
// GemmKnobs::texel_loads, a flag, is the token "tex" when on;
// GemmKnobs::swap_operands the token "swap".
constexpr std::string_view kTexelToken = "tex";
constexpr std::string_view kSwapToken = "swap";
// GemmKnobs' matrix fields, the token "mma<M>x<N>x<K><precision>l<lanes>".
constexpr std::string_view kMatrixToken = "mma";
constexpr std::uint32_t kMaxMatrixDim = 64;
constexpr std::uint32_t kMaxMatrixTiles = 4;
constexpr kir::MatrixPrecision kMatrixPrecisions[] = {kir::MatrixPrecision::tf32, kir::MatrixPrecision::f16,
                                                      kir::MatrixPrecision::bf16};



constexpr KnobField<ConvKnobs> kConvFields[] = {
    {"tile_channels", "c", &ConvKnobs::tile_channels, std::nullopt},
    {"tile_width", "w", &ConvKnobs::tile_width, std::nullopt},
    {"workgroup_size", "wg", &ConvKnobs::workgroup_size, std::nullopt},
};

constexpr KnobField<AttentionKnobs> kAttentionFields[] = {
    {"rows", "r", &AttentionKnobs::rows, std::nullopt},
    {"columns", "c", &AttentionKnobs::columns, std::nullopt},
    {"key_block", "k", &AttentionKnobs::key_block, std::nullopt},
    {"vector_width", "v", &AttentionKnobs::vector_width, std::nullopt},
    {"workgroup_size", "wg", &AttentionKnobs::workgroup_size, kDefaultAttentionWorkgroup},
};

template <class Knobs, std::size_t N>
void print_fields(std::string& text, const Knobs& knobs, const KnobField<Knobs> (&fields)[N]) {
  for (const KnobField<Knobs>& field : fields) {
    const std::uint32_t value = knobs.*field.member;
    if (field.omitted_when && value == *field.omitted_when) continue;
    if (!text.empty()) text += "_";
    text += field.prefix + std::to_string(value);
  }
}

[[noreturn]] void bad_knobs(std::string_view kind, std::string_view text, const std::string& why) {
  throw_error(ErrorKind::InvalidArgument, std::string(kind) + " knobs '" + std::string(text) + "': " + why);
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::optional<std::uint32_t> parse_number(std::string_view digits) {
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::uint32_t value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value;
}

std::string matrix_token(const GemmKnobs& knobs) {
  const auto precision = static_cast<kir::MatrixPrecision>(knobs.matrix_precision);
  const bool known = knobs.matrix_precision < std::size(kMatrixPrecisions);
  return std::string(kMatrixToken) + std::to_string(knobs.matrix_m) + "x" + std::to_string(knobs.matrix_n) + "x" +
         std::to_string(knobs.matrix_k) + (known ? kir::matrix_precision_name(precision) : "?") + "l" +
         std::to_string(knobs.matrix_lanes);
}

// Parses matrix_token's text into `knobs`; false when malformed.
bool parse_matrix_token(std::string_view token, GemmKnobs& knobs) {
  token.remove_prefix(kMatrixToken.size());
  auto number = [&](std::uint32_t& out) {
    std::size_t digits = 0;
    while (digits < token.size() && std::isdigit(static_cast<unsigned char>(token[digits]))) ++digits;
    const std::optional<std::uint32_t> value = parse_number(token.substr(0, digits));
    token.remove_prefix(digits);
    if (value) out = *value;
    return value.has_value();
  };
  auto literal = [&](std::string_view text) {
    if (token.substr(0, text.size()) != text) return false;
    token.remove_prefix(text.size());
    return true;
  };
  if (!number(knobs.matrix_m) || !literal("x") || !number(knobs.matrix_n) || !literal("x") || !number(knobs.matrix_k))
    return false;
  bool precision = false;
  for (const kir::MatrixPrecision p : kMatrixPrecisions)
    if (!precision && literal(kir::matrix_precision_name(p))) {
      knobs.matrix_precision = static_cast<std::uint8_t>(p);
      precision = true;
    }
  return precision && literal("l") && number(knobs.matrix_lanes) && token.empty();
}

// Fills `knobs` from `tokens` ("k4", "wg64", ...) per `fields`.
template <class Knobs, std::size_t N>
void parse_fields(Knobs& knobs, std::span<const std::string_view> tokens, const KnobField<Knobs> (&fields)[N],
                  std::string_view kind, std::string_view text) {
  std::array<bool, N> seen{};
  for (std::string_view token : tokens) {
    std::size_t match = N;
    std::optional<std::uint32_t> value;
    for (std::size_t i = 0; i < N && match == N; ++i) {
      const std::string_view prefix = fields[i].prefix;
      if (token.substr(0, prefix.size()) != prefix) continue;
      if (token.size() == prefix.size())
        bad_knobs(kind, text, std::string("field ") + fields[i].name + " ('" + fields[i].prefix + "') has no value");
      if ((value = parse_number(token.substr(prefix.size())))) match = i;
    }
    if (match == N) bad_knobs(kind, text, "unknown field '" + std::string(token) + "'");
    if (seen[match]) bad_knobs(kind, text, std::string("field ") + fields[match].name + " is given twice");
    seen[match] = true;
    knobs.*fields[match].member = *value;
  }
  for (std::size_t i = 0; i < N; ++i) {
    if (seen[i]) continue;
    if (!fields[i].omitted_when)
      bad_knobs(kind, text, std::string("field ") + fields[i].name + " ('" + fields[i].prefix + "') is missing");
    knobs.*fields[i].member = *fields[i].omitted_when;
  }
}

// check_knobs for text from outside: its Internal error becomes the caller's InvalidArgument.
template <class Knobs>
void check_parsed(const Knobs& knobs, std::string_view kind, std::string_view text) {
  try {
    check_knobs(knobs);
  } catch (const Error& error) {
    bad_knobs(kind, text, error.what());
  }
}

}  // namespace

std::string to_string(const GemmKnobs& knobs) {
  std::string text = std::to_string(knobs.tile_m) + "x" + std::to_string(knobs.tile_n);
  print_fields(text, knobs, kGemmFields);
  if (knobs.texel_loads) text += "_" + std::string(kTexelToken);
  if (knobs.swap_operands) text += "_" + std::string(kSwapToken);
  if (knobs.matrix_m != 0) text += "_" + matrix_token(knobs);
  return text;
}

std::string to_string(const ConvKnobs& knobs) {
  std::string text;
  print_fields(text, knobs, kConvFields);
  return text;
}

std::string to_string(const ConvPlan& plan) {
  const bool gemm = plan.algorithm == ConvAlgorithm::gemm_1x1 || plan.algorithm == ConvAlgorithm::implicit_gemm;
  return std::string(conv_algorithm_name(plan.algorithm)) + ":" + (gemm ? to_string(plan.gemm) : to_string(plan.conv));
}

GemmKnobs parse_gemm_knobs(std::string_view text) {
  const std::vector<std::string_view> tokens = split(text, '_');
  const std::vector<std::string_view> tile = split(tokens.front(), 'x');
  const std::optional<std::uint32_t> tile_m = parse_number(tile.front());
  const std::optional<std::uint32_t> tile_n = tile.size() == 2 ? parse_number(tile.back()) : std::nullopt;
  if (!tile_m || !tile_n)
    bad_knobs("GEMM", text, "field tile_m x tile_n ('MxN') is malformed: '" + std::string(tokens.front()) + "'");
  GemmKnobs knobs;
  knobs.tile_m = *tile_m;
  knobs.tile_n = *tile_n;
  std::vector<std::string_view> fields(tokens.begin() + 1, tokens.end());
  const auto texel = std::find(fields.begin(), fields.end(), kTexelToken);
  knobs.texel_loads = texel != fields.end();
  if (knobs.texel_loads) fields.erase(texel);
  const auto swap = std::find(fields.begin(), fields.end(), kSwapToken);
  knobs.swap_operands = swap != fields.end();
  if (knobs.swap_operands) fields.erase(swap);
  const auto matrix = std::find_if(fields.begin(), fields.end(),
                                   [](std::string_view f) { return f.substr(0, kMatrixToken.size()) == kMatrixToken; });
  if (matrix != fields.end()) {
    if (!parse_matrix_token(*matrix, knobs) || knobs.matrix_m == 0)
      bad_knobs("GEMM", text, "field matrix ('mma<M>x<N>x<K><tf32|f16|bf16>l<lanes>') is malformed: '" +
                                  std::string(*matrix) + "'");
    fields.erase(matrix);
  }
  parse_fields(knobs, std::span<const std::string_view>(fields), kGemmFields, "GEMM", text);
  check_parsed(knobs, "GEMM", text);
  return knobs;
}

ConvKnobs parse_conv_knobs(std::string_view text) {
  ConvKnobs knobs;
  parse_fields(knobs, split(text, '_'), kConvFields, "convolution", text);
  check_parsed(knobs, "convolution", text);
  return knobs;
}

ConvAlgorithm parse_conv_algorithm(std::string_view name) {
  for (ConvAlgorithm algorithm : {ConvAlgorithm::gemm_1x1, ConvAlgorithm::direct, ConvAlgorithm::implicit_gemm,
                                  ConvAlgorithm::depthwise})
    if (name == conv_algorithm_name(algorithm)) return algorithm;
  throw_error(ErrorKind::InvalidArgument, "unknown convolution algorithm '" + std::string(name) +
                                              "' (gemm_1x1, direct, implicit_gemm, depthwise)");
}

AttentionKnobs parse_attention_knobs(std::string_view text) {
  // "r2c64k4v4" -> {"r2", "c64", "k4", "v4"}: a token ends where a digit meets a letter.
  std::vector<std::string_view> tokens;
  std::size_t start = 0;
  for (std::size_t i = 1; i <= text.size(); ++i)
    if (i == text.size() || (std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
                             !std::isdigit(static_cast<unsigned char>(text[i])))) {
      tokens.push_back(text.substr(start, i - start));
      start = i;
    }
  AttentionKnobs knobs;
  parse_fields(knobs, tokens, kAttentionFields, "attention", text);
  const bool valid = knobs.rows <= 8 && knobs.columns <= 128 && knobs.key_block <= 16 &&
                     (knobs.vector_width == 1 || knobs.vector_width == 4);
  if (!valid) bad_knobs("attention", text, "a value is outside the template's range (rows 1..8, columns 1..128, "
                                           "key_block 1..16, vector_width 1 or 4)");
  for (const KnobField<AttentionKnobs>& field : kAttentionFields)
    if (knobs.*field.member == 0) bad_knobs("attention", text, std::string("field ") + field.name + " is 0");
  return knobs;
}

ConvPlan parse_conv_plan(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos)
    bad_knobs("convolution plan", text, "expected 'algorithm:knobs' (\"direct:c8_w8_wg64\")");
  ConvPlan plan;
  plan.algorithm = parse_conv_algorithm(text.substr(0, colon));
  const std::string_view knobs = text.substr(colon + 1);
  if (plan.algorithm == ConvAlgorithm::gemm_1x1 || plan.algorithm == ConvAlgorithm::implicit_gemm)
    plan.gemm = parse_gemm_knobs(knobs);
  else
    plan.conv = parse_conv_knobs(knobs);
  return plan;
}

void check_knobs(const GemmKnobs& knobs) {
  const std::string text = to_string(knobs);
  check_range("tile_m", knobs.tile_m, kMaxGemmTile, text);
  check_range("tile_n", knobs.tile_n, knobs.subgroup_broadcast != 0 ? kMaxSubgroupGemmTileN : kMaxGemmTile, text);
  check_range("k_unroll", knobs.k_unroll, kMaxUnroll, text);
  check_range("workgroup_size", knobs.workgroup_size, kMaxWorkgroup, text);
  check_range("panel_width", knobs.panel_width, kMaxPanel, text);
  KILN_CHECK(knobs.vector_width == 1 || knobs.vector_width == 4, ErrorKind::Internal,
             "template knob vector_width = " + std::to_string(knobs.vector_width) + " is not 1 or 4 (knobs " + text +
                 ")");
  if (knobs.subgroup_broadcast != 0)
    KILN_CHECK(std::has_single_bit(knobs.subgroup_broadcast) && knobs.subgroup_broadcast <= kMaxSubgroupLanes &&
                   knobs.workgroup_size % knobs.subgroup_broadcast == 0 && knobs.shared_k_tile == 0,
               ErrorKind::Internal,
               "template knob subgroup_broadcast = " + std::to_string(knobs.subgroup_broadcast) +
                   " must be a power of two up to " + std::to_string(kMaxSubgroupLanes) +
                   " dividing the workgroup, without shared tiling (knobs " + text + ")");
  KILN_CHECK(!knobs.texel_loads || knobs.shared_k_tile == 0, ErrorKind::Internal,
             "template knob texel_loads needs the register or subgroup path, not shared tiling (knobs " + text + ")");
  if (knobs.shared_k_tile == 0) {
    KILN_CHECK(knobs.split_k == 1 && knobs.shared_stages == 1 && knobs.workgroup_n == 0 && knobs.matrix_m == 0,
               ErrorKind::Internal,
               "template knobs split_k, shared_stages, workgroup_n and matrix units need shared tiling "
               "(shared_k_tile > 0) (knobs " + text + ")");
    return;
  }
  if (knobs.matrix_m != 0) {
    check_range("matrix_m", knobs.matrix_m, kMaxMatrixDim, text);
    check_range("matrix_n", knobs.matrix_n, kMaxMatrixDim, text);
    check_range("matrix_k", knobs.matrix_k, kMaxMatrixDim, text);
    check_range("tile_m (instructions)", knobs.tile_m, kMaxMatrixTiles, text);
    check_range("tile_n (instructions)", knobs.tile_n, kMaxMatrixTiles, text);
    KILN_CHECK(knobs.matrix_precision < std::size(kMatrixPrecisions), ErrorKind::Internal,
               "template knob matrix_precision = " + std::to_string(knobs.matrix_precision) + " is unknown (knobs " +
                   text + ")");
    KILN_CHECK(std::has_single_bit(knobs.matrix_lanes) && knobs.matrix_lanes <= kMaxSubgroupLanes &&
                   knobs.workgroup_size % knobs.matrix_lanes == 0,
               ErrorKind::Internal,
               "template knob matrix_lanes = " + std::to_string(knobs.matrix_lanes) +
                   " must be a power of two up to " + std::to_string(kMaxSubgroupLanes) +
                   " dividing the workgroup (knobs " + text + ")");
    KILN_CHECK(knobs.shared_k_tile % knobs.matrix_k == 0 && knobs.split_k == 1 && knobs.workgroup_n == 0 &&
                   std::has_single_bit(knobs.workgroup_size / knobs.matrix_lanes),
               ErrorKind::Internal,
               "template knobs with matrix units need shared_k_tile a multiple of matrix_k, no split_k or "
               "workgroup_n, and a power-of-two number of subgroups (knobs " + text + ")");
  } else {
    KILN_CHECK(knobs.matrix_n == 0 && knobs.matrix_k == 0 && knobs.matrix_lanes == 0 && knobs.matrix_precision == 0,
               ErrorKind::Internal, "template knobs: matrix fields set with matrix_m 0 (knobs " + text + ")");
  }
  check_range("shared_k_tile", knobs.shared_k_tile, kMaxSharedKTile, text);
  check_range("split_k", knobs.split_k, kMaxWorkgroup, text);
  check_range("shared_stages", knobs.shared_stages, kMaxSharedStages, text);
  const std::uint32_t slice = knobs.workgroup_size / knobs.split_k;
  KILN_CHECK(std::has_single_bit(knobs.split_k) && knobs.workgroup_size % knobs.split_k == 0 &&
                 std::has_single_bit(slice),
             ErrorKind::Internal,
             "template knob split_k = " + std::to_string(knobs.split_k) +
                 " must be a power of two splitting the workgroup into power-of-two slices (knobs " + text + ")");
  KILN_CHECK(knobs.workgroup_n == 0 || (std::has_single_bit(knobs.workgroup_n) && slice % knobs.workgroup_n == 0),
             ErrorKind::Internal,
             "template knob workgroup_n = " + std::to_string(knobs.workgroup_n) +
                 " must be 0 or a power of two dividing the K slice's " + std::to_string(slice) +
                 " invocations (knobs " + text + ")");
}

void check_knobs(const ConvKnobs& knobs) {
  const std::string text = to_string(knobs);
  check_range("tile_channels", knobs.tile_channels, kMaxConvTile, text);
  check_range("tile_width", knobs.tile_width, kMaxConvTile, text);
  check_range("workgroup_size", knobs.workgroup_size, kMaxWorkgroup, text);
}

}  // namespace kiln::shaders
