// Kernels with matrix fragments that several suites run: the interpreter's
// (test_fragments), every backend's (test_backend_conformance) and every
// offline target's compilers (test_codegen_compile).
#pragma once

#include "src/kernel/ir.h"

#include <cstdint>
#include <stdexcept>

namespace kiln::test {

using namespace kiln::kir;

// Y (m x n) = A (m x k, row-major) * B (k x n, row-major): one
// shape.m x shape.n output tile per subgroup, k in steps of shape.k, edge
// tiles bounded by rows and cols. `subgroup` lanes per subgroup, `workgroup`
// invocations per workgroup; the grid is the tiles exactly.
inline kiln::kir::Kernel fragment_gemm(int m, int n, int k, std::uint32_t subgroup, std::uint32_t workgroup,
                                       MatrixPrecision precision, ScalarType input_type = ScalarType::f32,
                                       FragmentShape shape = {16, 16, 8}) {
  Kernel kernel("fragment_gemm");
  const Buf a = kernel.add_buffer("a", input_type, Access::read);
  const Buf b = kernel.add_buffer("b", input_type, Access::read);
  const Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  kernel.subgroup_size = subgroup;
  kernel.workgroup_size = workgroup;
  const Frag fa = kernel.add_fragment("fa", FragmentRole::a, shape, precision);
  const Frag fb = kernel.add_fragment("fb", FragmentRole::b, shape, precision);
  const Frag acc = kernel.add_fragment("acc", FragmentRole::accumulator, shape);
  const int tm = static_cast<int>(shape.m), tn = static_cast<int>(shape.n), tk = static_cast<int>(shape.k);
  const int tiles_n = (n + tn - 1) / tn, tiles = ((m + tm - 1) / tm) * tiles_n;
  const int per_group = static_cast<int>(workgroup / subgroup);
  if (tiles % per_group != 0) throw std::invalid_argument("fragment_gemm: the tiles do not fill whole workgroups");
  kernel.global_size = static_cast<std::int64_t>(tiles / per_group) * workgroup;
  const Expr tile = var("tile", ScalarType::i32);
  const Expr row0 = var("row0", ScalarType::i32), col0 = var("col0", ScalarType::i32);
  const Expr kk = var("kk", ScalarType::i32);
  kernel.body = {
      // local_index() / subgroup is subgroup_id(), without asking the target for subgroups.
      declare("tile", ScalarType::i32, workgroup_index() * i32(per_group) + local_index() / i32(static_cast<std::int64_t>(subgroup))),
      declare("row0", ScalarType::i32, tile / i32(tiles_n) * i32(tm)),
      declare("col0", ScalarType::i32, tile % i32(tiles_n) * i32(tn)),
      fragment_fill(acc, f32(0.0)),
      loop("kk", i32(0), i32(k),
           {fragment_load(fa, a, row0 * i32(k) + kk, i32(k), i32(m) - row0, i32(k) - kk),
            fragment_load(fb, b, kk * i32(n) + col0, i32(n), i32(k) - kk, i32(n) - col0),
            fragment_mma(acc, fa, fb, acc)},
           tk),
      fragment_store(acc, y, row0 * i32(n) + col0, i32(n), i32(m) - row0, i32(n) - col0),
  };
  verify(kernel);
  return kernel;
}

}  // namespace kiln::test
