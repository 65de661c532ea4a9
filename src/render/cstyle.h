// The one C-style renderer: kernel IR -> GLSL, CUDA C++, HIP C++ or C99
// source, with every difference between the languages looked up in a
// backend::LanguageTable (backends/language.h).
//
// Rendered shape, for every language:
//   <prelude>
//   <buffer declarations at global scope, if the language has them>
//   <kernel header with the buffer parameters, if the language has them> {
//     <u32> kiln_linear = <global index over the 2-D grid>;
//     <i32> kiln_group = <workgroup index>;             (if used, or the kernel has barriers)
//     if (kiln_linear >= <global_size>u) return;
//       (kernels with barriers: if (kiln_group >= <global_size / wg>) return;
//        a guard uniform across each workgroup, since no invocation may skip a barrier)
//     <i32> kiln_gid = <cast to i32 of kiln_linear>;   (only if the body uses it)
//     <i32> kiln_lid = <index in the workgroup>;       (only if the body uses it)
//     <body>
//   }
// Shared arrays "x" are named "s_x" and declared where the language table
// says (GLSL global scope, CUDA/HIP __shared__ in the body, C99 parameters).
// Names are prefixed so no IR name can collide with a keyword, a built-in or
// the renderer's own kiln_* names: buffer "x" -> "b_x", variable "k" -> "v_k".
// The kernel function keeps the kernel's name (verify() rejects reserved ones).
// A kernel with parameters declares them as members p0, p1, ... of one block
// (GLSL push constants, a CUDA/HIP/C99 struct argument); param(i) reads p<i>.
// A vector load reads one vector into "kiln_vec<n>", through the buffer's
// vector view "kiln_v<width>_<buffer>" where the language declares one.
// Texel buffers are declared and read with the table's texel_* spellings;
// a kernel with subgroup operations gets the table's subgroup directives
// after its version line and guards whole workgroups, as barriers need.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/language.h"
#include "src/kernel/ir.h"

namespace kiln::render {

// Verifies `kernel` (throws Error(Internal) if malformed) and renders it.
std::string render(const kir::Kernel& kernel, const backend::LanguageTable& language);

// render() plus the metadata a compiler needs: name, language, workgroup size, buffer count,
// parameter count, texel widths.
backend::KernelSource make_kernel_source(const kir::Kernel& kernel, const backend::LanguageTable& language);

// Where `language` declares `kernel`'s shared arrays dynamically (their
// bytes exceed LanguageTable::max_static_shared_bytes): each array's byte
// offset in the one dynamic array and the array's bytes
// (KernelSource::dynamic_shared_bytes); no offsets and 0 bytes where they
// are declared statically.
struct DynamicShared {
  std::vector<std::uint64_t> offsets;
  std::uint32_t bytes = 0;
};
DynamicShared dynamic_shared(const kir::Kernel& kernel, const backend::LanguageTable& language);

// What `kernel` needs of a target (Backend::supports): workgroup, shared
// memory, buffers, parameters, subgroup operations, texel buffers.
backend::KernelRequirements kernel_requirements(const kir::Kernel& kernel);

}  // namespace kiln::render
