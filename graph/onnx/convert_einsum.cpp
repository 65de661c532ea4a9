// Einsum as kiln's own ops: each operand's summed-away letters reduced with
// ReduceSum, then operands contracted pairwise, left to right, each pair as
// one batched MatMul between Transposes and Reshapes, and a last Transpose
// into the output's order. This covers the contractions exporters emit
// (attention's "bhqd,bhkd->bhqk", "bnd,dm->bnm", outer products, traces of
// batched matrix products); a letter repeated within one operand (a
// diagonal) is refused with the equation.
#include "graph/onnx/convert_einsum.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace kiln::onnx_import {

namespace {

using graph::ValueId;

// An operand on its way through the contraction: its value and, per axis,
// the letter that labels it.
struct Operand {
  ValueId value;
  std::string letters;
};

struct Equation {
  std::vector<std::string> inputs;
  std::string output;
};

// Letters for '...': upper-case ones the equation does not use, the same
// for every operand (ONNX aligns ellipsis dims from the right).
Equation parse(const std::string& text, const std::vector<std::size_t>& ranks, const std::string& where) {
  std::string eq;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  auto fail = [&](const std::string& why) {
    throw_error(ErrorKind::InvalidArgument, where + "equation '" + text + "': " + why);
  };
  const std::size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (std::size_t start = 0;;) {
    const std::size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size())
    fail(std::to_string(terms.size()) + " operand terms for " + std::to_string(ranks.size()) + " inputs");
  std::string output = arrow == std::string::npos ? std::string() : eq.substr(arrow + 2);
  auto check_letters = [&](const std::string& term) {
    for (std::size_t i = 0; i < term.size(); ++i) {
      if (term.compare(i, 3, "...") == 0) {
        i += 2;
        continue;
      }
      if (!std::isalpha(static_cast<unsigned char>(term[i]))) fail("'" + std::string(1, term[i]) + "' is not a letter");
    }
  };
  for (const std::string& t : terms) check_letters(t);
  check_letters(output);

  // The ellipsis' rank: the largest any operand gives it.
  std::size_t ellipsis_rank = 0;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    const std::size_t dots = terms[k].find("...");
    const std::size_t letters = terms[k].size() - (dots == std::string::npos ? 0 : 3);
    if (dots == std::string::npos ? letters != ranks[k] : letters > ranks[k])
      fail("operand " + std::to_string(k) + " has rank " + std::to_string(ranks[k]) + ", its term '" + terms[k] +
           "' does not fit it");
    if (dots != std::string::npos) ellipsis_rank = std::max(ellipsis_rank, ranks[k] - letters);
  }
  std::string spare;
  for (char c = 'Z'; c >= 'A' && spare.size() < ellipsis_rank; --c)
    if (eq.find(c) == std::string::npos) spare.insert(spare.begin(), c);
  if (spare.size() < ellipsis_rank) fail("too many letters for the ellipsis' " + std::to_string(ellipsis_rank) + " axes");

  Equation out;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    std::string t = terms[k];
    const std::size_t dots = t.find("...");
    if (dots != std::string::npos) t.replace(dots, 3, spare.substr(ellipsis_rank - (ranks[k] - (t.size() - 3))));
    for (std::size_t i = 0; i < t.size(); ++i)
      if (t.find(t[i], i + 1) != std::string::npos)
        throw_error(ErrorKind::Unsupported, where + "equation '" + text + "': the letter '" + std::string(1, t[i]) +
                                                "' labels two axes of one operand (a diagonal), which kiln does not take");
    out.inputs.push_back(t);
  }
  if (arrow == std::string::npos) {
    // Implicit output: the ellipsis, then the letters used once, in alphabetical order.
    std::map<char, int> uses;
    for (const std::string& t : out.inputs)
      for (char c : t) ++uses[c];
    output = spare;
    for (const auto& [c, count] : uses)
      if (count == 1 && spare.find(c) == std::string::npos) output += c;
  } else {
    const std::size_t dots = output.find("...");
    if (dots != std::string::npos) output.replace(dots, 3, spare);
  }
  for (std::size_t i = 0; i < output.size(); ++i) {
    if (output.find(output[i], i + 1) != std::string::npos) fail("the output repeats '" + std::string(1, output[i]) + "'");
    bool found = false;
    for (const std::string& t : out.inputs) found = found || t.find(output[i]) != std::string::npos;
    if (!found) fail("the output's '" + std::string(1, output[i]) + "' labels no input axis");
  }
  out.output = output;
  return out;
}

class Contraction {
 public:
  Contraction(const OnnxNode& n, ImportContext& ctx) : n_(n), ctx_(ctx) {}

  const graph::SymShape& shape(ValueId v) const { return ctx_.type(v).shape; }

  // Sums away the letters of `op` that `keep` lacks.
  Operand reduce(Operand op, const std::string& keep) {
    std::vector<std::int64_t> axes;
    std::string kept;
    for (std::size_t i = 0; i < op.letters.size(); ++i) {
      if (keep.find(op.letters[i]) == std::string::npos) axes.push_back(static_cast<std::int64_t>(i));
      else kept += op.letters[i];
    }
    if (axes.empty()) return op;
    Attributes attrs;
    attrs.set("axes", std::move(axes));
    attrs.set("keepdims", std::int64_t{0});
    return {emit("ReduceSum", op.value, std::move(attrs)), kept};
  }

  // `op` with its axes in the order of `letters` (a permutation of its own).
  Operand transpose(Operand op, const std::string& letters) {
    if (op.letters == letters) return op;
    std::vector<std::int64_t> perm;
    for (char c : letters) perm.push_back(static_cast<std::int64_t>(op.letters.find(c)));
    Attributes attrs;
    attrs.set("perm", std::move(perm));
    return {emit("Transpose", op.value, std::move(attrs)), letters};
  }

  ValueId reshape(ValueId v, std::vector<std::int64_t> to) {
    if (shape(v) == to) return v;
    Attributes attrs;
    attrs.set("shape", std::move(to));
    return emit("Reshape", v, std::move(attrs));
  }

  // a and b contracted over their shared letters that `keep` lacks; the
  // result's letters: the shared kept ones (batch), a's own, b's own.
  Operand contract(Operand a, Operand b, const std::string& keep) {
    std::string batch, contracted, a_own, b_own;
    for (char c : a.letters) {
      const bool in_b = b.letters.find(c) != std::string::npos;
      if (!in_b) a_own += c;
      else if (keep.find(c) != std::string::npos) batch += c;
      else contracted += c;
    }
    for (char c : b.letters)
      if (a.letters.find(c) == std::string::npos) b_own += c;
    for (char c : batch + contracted) {
      const std::int64_t ea = extent(a, c), eb = extent(b, c);
      KILN_CHECK(ea == eb, ErrorKind::ShapeMismatch,
                 n_.where + "the axes labelled '" + std::string(1, c) + "' have extents " + std::to_string(ea) + " and " +
                     std::to_string(eb) + " (kiln's Einsum does not broadcast)");
    }
    auto product = [&](const Operand& op, const std::string& letters) {
      std::int64_t p = 1;
      for (char c : letters) p *= extent(op, c);
      return p;
    };
    a = transpose(a, batch + a_own + contracted);
    b = transpose(b, batch + contracted + b_own);
    std::vector<std::int64_t> batch_dims;
    for (char c : batch) batch_dims.push_back(extent(a, c));
    const std::int64_t B = product(a, batch), M = product(a, a_own), K = product(a, contracted), N = product(b, b_own);
    const ValueId a3 = reshape(a.value, {B, M, K});
    const ValueId b3 = reshape(b.value, {B, K, N});
    const ValueId product3 = ctx_.emit(n_, "MatMul", {a3, b3}, {}, suffix()).at(0);
    std::vector<std::int64_t> dims = batch_dims;
    for (char c : a_own) dims.push_back(extent(a, c));
    for (char c : b_own) dims.push_back(extent(b, c));
    return {reshape(product3, dims), batch + a_own + b_own};
  }

 private:
  std::int64_t extent(const Operand& op, char c) const { return shape(op.value).at(op.letters.find(c)); }

  std::string suffix() { return "einsum" + std::to_string(step_++); }

  ValueId emit(const std::string& op, ValueId input, Attributes attrs) {
    return ctx_.emit(n_, op, {input}, std::move(attrs), suffix()).at(0);
  }

  const OnnxNode& n_;
  ImportContext& ctx_;
  int step_ = 0;
};

}  // namespace

std::vector<ValueId> convert_einsum(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(!n.inputs.empty(), ErrorKind::Corrupt, n.where + "Einsum needs at least one input");
  KILN_CHECK(n.attrs.has("equation"), ErrorKind::Corrupt, n.where + "attribute 'equation' is required");
  std::vector<std::size_t> ranks;
  for (ValueId v : n.inputs) {
    KILN_CHECK(v >= 0, ErrorKind::Corrupt, n.where + "an input is missing");
    KILN_CHECK(!ctx.type(v).dynamic, ErrorKind::Unsupported,
               n.where + "an input's shape is only known at run time; kiln's Einsum needs static shapes");
    KILN_CHECK(ctx.type(v).dtype == DType::f32, ErrorKind::Unsupported,
               n.where + "Einsum of " + std::string(dtype_name(ctx.type(v).dtype)) + " is not supported (f32 only)");
    ranks.push_back(ctx.type(v).shape.size());
  }
  const Equation eq = parse(n.attrs.get_string("equation", ""), ranks, n.where);
  Contraction c(n, ctx);
  std::vector<Operand> operands;
  for (std::size_t k = 0; k < n.inputs.size(); ++k) operands.push_back({n.inputs[k], eq.inputs[k]});

  // The letters operands after k, or the output, still need.
  auto needed_after = [&](std::size_t k) {
    std::string letters = eq.output;
    for (std::size_t j = k + 1; j < operands.size(); ++j) letters += operands[j].letters;
    return letters;
  };
  Operand acc = c.reduce(operands[0], needed_after(0) + (operands.size() > 1 ? operands[1].letters : ""));
  for (std::size_t k = 1; k < operands.size(); ++k) {
    const std::string keep = needed_after(k);
    Operand next = c.reduce(operands[k], keep + acc.letters);
    acc = c.contract(c.reduce(acc, keep + next.letters), next, keep);
  }
  acc = c.reduce(acc, eq.output);
  acc = c.transpose(acc, eq.output);
  return {acc.value};  // the input itself for "ij->ij", as Identity aliases it
}

}  // namespace kiln::onnx_import
