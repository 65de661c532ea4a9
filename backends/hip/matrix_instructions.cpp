// MFMA for kir matrix fragments. Each lane's elements are f32 values already
// rounded to the inputs' precision (kir's rule), so converting them to
// _Float16 or to bf16 bits is exact.
#include "backends/hip/matrix_instructions.h"

namespace kiln::backend::hip {
namespace {

// Lane L of 64: lo = L & 15, hi = L >> 4. The f32 accumulator of a 16x16
// tile: rows 4 * hi + e, column lo.
FragmentLayout accumulator_16x16() { return {4, 0, 0, 1, {0, 1, 2, 3}, {0, 0, 0, 0}}; }

const char* const kVectorTypes =
    "typedef float kiln_float4 __attribute__((ext_vector_type(4)));\n"
    "typedef _Float16 kiln_half4 __attribute__((ext_vector_type(4)));\n"
    "typedef short kiln_short4 __attribute__((ext_vector_type(4)));\n";

// A function `name`(d, a, b, c) computing d = `builtin`(a operand, b operand, c).
std::string mfma_function(const std::string& name, const std::string& builtin, const std::string& a_operand,
                          const std::string& b_operand) {
  return std::string(kVectorTypes) + "__device__ __forceinline__ void " + name +
         "(float* d, const float* a, const float* b, const float* c) {\n"
         "  const kiln_float4 acc = {c[0], c[1], c[2], c[3]};\n"
         "  const kiln_float4 r = " + builtin + "(" + a_operand + ", " + b_operand + ", acc, 0, 0, 0);\n"
         "  d[0] = r[0]; d[1] = r[1]; d[2] = r[2]; d[3] = r[3];\n"
         "}\n";
}

// 16x16x16 with 16-bit inputs: a (16x16) row lo, columns 4 * hi + e; b
// (16x16) rows 4 * hi + e, column lo.
MatrixInstruction mfma_16x16x16(const std::string& inputs, const std::string& builtin, const std::string& vector,
                                const std::string& element) {
  auto operand = [&](const char* array) {
    std::string text = "(" + vector + "){";
    for (int e = 0; e < 4; ++e) {
      const std::string value = std::string(array) + "[" + std::to_string(e) + "]";
      text += (e ? ", " : "") + (element.empty() ? value : element + "(" + value + ")");
    }
    return text + "}";
  };
  MatrixInstruction ins;
  ins.shape = {inputs, 16, 16, 16, 64};
  ins.lane_bits = 4;
  ins.a = {0, 1, 4, 0, {0, 0, 0, 0}, {0, 1, 2, 3}};
  ins.b = {4, 0, 0, 1, {0, 1, 2, 3}, {0, 0, 0, 0}};
  ins.accumulator = accumulator_16x16();
  const std::string name = "kiln_mfma_" + inputs + "_16x16x16";
  ins.helpers = mfma_function(name, builtin, operand("a"), operand("b"));
  ins.call = name + "({d}, {a}, {b}, {c});";
  return ins;
}

}  // namespace

std::vector<MatrixInstruction> mfma_instructions() {
  MatrixInstruction tf32;
  tf32.shape = {"tf32", 16, 16, 4, 64};
  tf32.lane_bits = 4;
  // a (16x4): row lo, column hi; b (4x16): row hi, column lo; one element each.
  tf32.a = {0, 1, 1, 0, {0}, {0}};
  tf32.b = {1, 0, 0, 1, {0}, {0}};
  tf32.accumulator = accumulator_16x16();
  tf32.helpers = mfma_function("kiln_mfma_tf32_16x16x4", "__builtin_amdgcn_mfma_f32_16x16x4f32", "a[0]", "b[0]");
  tf32.call = "kiln_mfma_tf32_16x16x4({d}, {a}, {b}, {c});";
  return {tf32, mfma_16x16x16("f16", "__builtin_amdgcn_mfma_f32_16x16x16f16", "kiln_half4", "(_Float16)"),
          mfma_16x16x16("bf16", "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", "kiln_short4",
                        "(short)kiln_f32_to_bf16")};
}

std::vector<MatrixShape> matrix_shapes(const std::string& arch) {
  const std::string processor = arch.substr(0, arch.find(':'));
  const bool cdna2_or_later = processor == "gfx90a" || processor == "gfx940" || processor == "gfx941" ||
                              processor == "gfx942";
  std::vector<MatrixShape> shapes;
  for (const MatrixInstruction& ins : mfma_instructions())
    if (cdna2_or_later || (processor == "gfx908" && ins.shape.inputs != "bf16")) shapes.push_back(ins.shape);
  return shapes;
}

}  // namespace kiln::backend::hip
