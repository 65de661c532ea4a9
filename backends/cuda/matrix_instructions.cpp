// PTX mma.sync for kir matrix fragments. Each lane's elements are f32 values
// already rounded to the inputs' precision (kir's rule), so passing TF32 as
// its f32 bits and packing two f16 / bf16 values per register loses nothing.
#include "backends/cuda/matrix_instructions.h"

#include <string>

namespace kiln::backend::cuda {
namespace {

// The f32 accumulator of a 16x8 tile (m16n8k8 and m16n8k16 alike): lane
// (groupID = lane >> 2, threadID_in_group = lane & 3) holds rows groupID and
// groupID + 8, columns 2 * threadID_in_group and the next.
FragmentLayout accumulator_16x8() { return {1, 0, 0, 2, {0, 0, 8, 8}, {0, 1, 0, 1}}; }

// The inline assembly of one mma.sync whose a and b registers are `a_regs`
// and `b_regs` (expressions of unsigned values), into temporaries, then d.
std::string mma_function(const std::string& name, const std::string& opcode, const std::vector<std::string>& a_regs,
                         const std::vector<std::string>& b_regs) {
  std::string operands = "{%0, %1, %2, %3}, {";
  int next = 4;
  auto list = [&](std::size_t count) {
    std::string text;
    for (std::size_t i = 0; i < count; ++i) text += (i ? ", %" : "%") + std::to_string(next++);
    return text + "}";
  };
  // One statement per list: the numbering follows the operands' order.
  operands += list(a_regs.size());
  operands += ", {";
  operands += list(b_regs.size());
  operands += ", {";
  operands += list(4);
  std::string inputs;
  for (const std::string& r : a_regs) inputs += "\"r\"(" + r + "), ";
  for (const std::string& r : b_regs) inputs += "\"r\"(" + r + "), ";
  inputs += "\"f\"(c[0]), \"f\"(c[1]), \"f\"(c[2]), \"f\"(c[3])";
  return "__device__ __forceinline__ void " + name +
         "(float* d, const float* a, const float* b, const float* c) {\n"
         "  float d0, d1, d2, d3;\n"
         "  asm volatile(\"" + opcode + " " + operands + ";\"\n"
         "               : \"=f\"(d0), \"=f\"(d1), \"=f\"(d2), \"=f\"(d3)\n"
         "               : " + inputs + ");\n"
         "  d[0] = d0; d[1] = d1; d[2] = d2; d[3] = d3;\n"
         "}\n";
}

// m16n8k16 with 16-bit inputs: two elements per register, the lower-indexed
// one in the low half; `to_bits` is the storage helper that rounds (exactly,
// for values already of the precision) an f32 to the element's bits.
MatrixInstruction mma_16x8x16(const std::string& inputs, const std::string& to_bits) {
  const std::string pack = "kiln_pack_" + inputs + "x2";
  auto packed = [&](const char* array, int first) {
    return pack + "(" + array + "[" + std::to_string(first) + "], " + array + "[" + std::to_string(first + 1) + "])";
  };
  MatrixInstruction ins;
  ins.shape = {inputs, 16, 8, 16, 32};
  ins.lane_bits = 2;
  // a (16x16): rows groupID (+8 for elements 2, 3, 6, 7), columns
  // 2 * threadID_in_group (+1 for odd elements, +8 for elements 4..7).
  ins.a = {1, 0, 0, 2, {0, 0, 8, 8, 0, 0, 8, 8}, {0, 1, 0, 1, 8, 9, 8, 9}};
  // b (16x8): rows 2 * threadID_in_group (+1 odd, +8 for elements 2, 3), column groupID.
  ins.b = {0, 2, 1, 0, {0, 1, 8, 9}, {0, 0, 0, 0}};
  ins.accumulator = accumulator_16x8();
  ins.helpers = "__device__ __forceinline__ unsigned int " + pack + "(float lo, float hi) {\n  return (unsigned int)" +
                to_bits + "(lo) | ((unsigned int)" + to_bits + "(hi) << 16);\n}\n" +
                mma_function("kiln_mma_" + inputs + "_16x8x16",
                             "mma.sync.aligned.m16n8k16.row.col.f32." + inputs + "." + inputs + ".f32",
                             {packed("a", 0), packed("a", 2), packed("a", 4), packed("a", 6)},
                             {packed("b", 0), packed("b", 2)});
  ins.call = "kiln_mma_" + inputs + "_16x8x16({d}, {a}, {b}, {c});";
  return ins;
}

}  // namespace

std::vector<MatrixInstruction> mma_sync_instructions() {
  MatrixInstruction tf32;
  tf32.shape = {"tf32", 16, 8, 8, 32};
  tf32.lane_bits = 2;
  // a (16x8): rows groupID (+8 for elements 1, 3), columns threadID_in_group (+4 for 2, 3).
  tf32.a = {1, 0, 0, 1, {0, 8, 0, 8}, {0, 0, 4, 4}};
  // b (8x8): rows threadID_in_group (+4 for element 1), column groupID.
  tf32.b = {0, 1, 1, 0, {0, 4}, {0, 0}};
  tf32.accumulator = accumulator_16x8();
  tf32.helpers = mma_function("kiln_mma_tf32_16x8x8", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
                              {"__float_as_uint(a[0])", "__float_as_uint(a[1])", "__float_as_uint(a[2])",
                               "__float_as_uint(a[3])"},
                              {"__float_as_uint(b[0])", "__float_as_uint(b[1])"});
  tf32.call = "kiln_mma_tf32_16x8x8({d}, {a}, {b}, {c});";
  return {tf32, mma_16x8x16("f16", "kiln_f32_to_f16"), mma_16x8x16("bf16", "kiln_f32_to_bf16")};
}

std::vector<MatrixShape> matrix_shapes(int sm) {
  if (sm < 80) return {};
  std::vector<MatrixShape> shapes;
  for (const MatrixInstruction& ins : mma_sync_instructions()) shapes.push_back(ins.shape);
  return shapes;
}

}  // namespace kiln::backend::cuda
