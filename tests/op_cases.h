// The op cases: each written once here, then crossed with every backend
// (test_conformance) and every offline code-generation target
// (test_codegen_compile). A case is a small model, usually one op, with inputs
// from a fixed seed; the oracle is graph::run_reference.
#pragma once

#include <kiln/model.h>
#include <kiln/tensor.h>

#include <string>
#include <vector>

namespace kiln::testing {

struct OpCase {
  std::string name;  // "Conv/stride2_pad1_groups2"
  Model model;
  std::vector<Tensor> inputs;
  float tolerance = 1e-4f;  // max |backend - reference|, relative to max(1, |reference|max); non-f32 outputs must be equal
};

std::vector<OpCase> make_op_cases();

// Families of cases kept in their own files, appended by make_op_cases().
void add_math_cases(std::vector<OpCase>& cases);  // op_cases_math.cpp
void add_data_cases(std::vector<OpCase>& cases);  // op_cases_data.cpp
void add_typed_cases(std::vector<OpCase>& cases);  // op_cases_typed.cpp: integer and bool tensors

}  // namespace kiln::testing
