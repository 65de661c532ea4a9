// The backend conformance kit: device-level checks written once against the
// backend interface (backends/backend.h) and run on every backend that has a
// device here (lavapipe's Vulkan on CI), each as backend/check. Kernels are
// kir kernels rendered in the backend's own language (src/render), so a new
// backend gets these checks without writing a test:
//
//   buffers, empty and large transfers, texel buffers at offsets, copies,
//   dispatch chains, 300 dispatches on a 2-D grid, recorded replay,
//   parameter blocks, shared memory with barriers, integer and math
//   semantics against the kir interpreter, 16-bit float storage and f16
//   arithmetic rounded bit for bit as the interpreter rounds them, timestamps, errors (bad
//   bindings, regions outside a buffer, out of memory, a bad device index)
//   and a device still usable after them, and command-list misuse (submit
//   before finish, recording after it, misaligned bindings, too many
//   workgroups, too wide a workgroup).
//
// Each backend declares what the kit expects of it
// (Backend::conformance_expectations): the checks it is known to fail, with
// the reason (a listed check that fails passes with that reason in the log,
// and one that starts passing fails, saying to remove it, so the list only
// shrinks), and its bound for math functions against the C library's float
// functions (GPU drivers may use approximations). A check a device cannot
// take (no timestamps) is skipped with the reason.
#include <boost/test/unit_test.hpp>

#include "backends/backend.h"
#include "backends/registry.h"
#include "fragment_kernels.h"
#include "src/kernel/interpreter.h"
#include "src/kernel/ir.h"
#include "src/render/cstyle.h"

#include <kiln/error.h>
#include <kiln/float16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace kb = kiln::backend;
namespace kir = kiln::kir;
using T = kir::ScalarType;
using Outcome = std::optional<std::string>;  // nullopt: the check passed; else what went wrong

struct Skip {
  std::string reason;
};

// One backend's device, and how to run kir kernels on it.
struct Kit {
  const kb::Backend& backend;
  std::shared_ptr<kb::Device> device;

  const kb::TargetDesc& target() const { return device->target(); }

  std::shared_ptr<kb::LoadedKernel> load(const kir::Kernel& kernel) const {
    kir::verify(kernel, target().max_shared_memory_bytes);
    if (auto why = backend.supports(kiln::render::kernel_requirements(kernel), target())) throw Skip{*why};
    const kb::KernelSource source = kiln::render::make_kernel_source(kernel, backend.language_for(target()));
    return device->load_kernel(source, backend.compiler().compile(source, target()));
  }

  std::shared_ptr<kb::Buffer> buffer_with(const std::vector<std::byte>& data) const {
    auto b = device->allocate(data.size());
    device->upload(*b, 0, data);
    return b;
  }

  std::vector<std::byte> read(const kb::Buffer& b) const {
    std::vector<std::byte> out(b.size());
    device->download(b, 0, out);
    return out;
  }

  std::array<std::uint32_t, 3> grid(const kir::Kernel& kernel) const {
    return kir::dispatch_grid(kernel, target().max_workgroup_count[0]);
  }

  // Runs `kernel` once on copies of `buffers`; returns them afterwards.
  std::vector<std::vector<std::byte>> run(const kir::Kernel& kernel, const std::vector<std::vector<std::byte>>& buffers) const {
    auto loaded = load(kernel);
    std::vector<std::shared_ptr<kb::Buffer>> held;
    std::vector<kb::BufferBinding> bindings;
    for (const auto& data : buffers) {
      held.push_back(buffer_with(data));
      bindings.push_back({held.back().get(), 0, data.size()});
    }
    auto list = device->create_command_list();
    list->dispatch(*loaded, grid(kernel), bindings, kernel.params);
    list->finish();
    list->submit();
    std::vector<std::vector<std::byte>> out;
    for (const auto& b : held) out.push_back(read(*b));
    return out;
  }

  float tolerance() const { return backend.conformance_expectations().math_tolerance; }
};

template <class V> std::vector<std::byte> bytes_of(const std::vector<V>& values) {
  std::vector<std::byte> out(values.size() * sizeof(V));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <class V> std::vector<V> values_of(const std::vector<std::byte>& bytes) {
  std::vector<V> out(bytes.size() / sizeof(V));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(V));
  return out;
}

std::vector<float> ramp(std::size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 97) * scale + offset;
  return v;
}

// The first element where the device and the interpreter differ by more than
// `tolerance` (relative to max(1, |expected|)), or nullopt.
Outcome compare_f32(const std::string& what, const std::vector<std::byte>& got, const std::vector<std::byte>& want,
                    float tolerance) {
  const auto g = values_of<float>(got), w = values_of<float>(want);
  for (std::size_t i = 0; i < w.size(); ++i) {
    const bool both_nan = std::isnan(g[i]) && std::isnan(w[i]);
    if (both_nan || g[i] == w[i] || std::fabs(g[i] - w[i]) <= tolerance * std::max(1.0f, std::fabs(w[i]))) continue;
    return what + "[" + std::to_string(i) + "] is " + std::to_string(g[i]) + ", the interpreter gives " +
           std::to_string(w[i]);
  }
  return std::nullopt;
}

Outcome compare_exact(const std::string& what, const std::vector<std::byte>& got, const std::vector<std::byte>& want) {
  if (got == want) return std::nullopt;
  std::size_t i = 0;
  while (i < got.size() && got[i] == want[i]) ++i;
  return what + " differs from the interpreter at byte " + std::to_string(i);
}

std::vector<std::vector<std::byte>> interpreted(const kir::Kernel& kernel, std::vector<std::vector<std::byte>> buffers) {
  std::vector<std::span<std::byte>> spans;
  for (auto& b : buffers) spans.emplace_back(b);
  kir::interpret(kernel, spans);
  return buffers;
}

// y[i] = x[i] + 1 over n elements.
kir::Kernel add_one(std::int64_t n) {
  kir::Kernel k("add_one");
  const kir::Buf x = k.add_buffer("x", T::f32, kir::Access::read);
  const kir::Buf y = k.add_buffer("y", T::f32, kir::Access::write);
  k.global_size = n;
  k.body = {kir::store(y, kir::global_index(), kir::load(x, kir::global_index(), T::f32) + kir::f32(1.0))};
  return k;
}

// ---- the checks ----------------------------------------------------------

Outcome buffers_round_trip_at_offsets(const Kit& kit) {
  std::vector<std::byte> data(4096);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7 + 3);
  auto b = kit.device->allocate(8192);
  if (b->size() < 8192) return "allocate(8192) gave a buffer of " + std::to_string(b->size()) + " bytes";
  kit.device->upload(*b, 256, data);
  kit.device->upload(*b, 4352, std::span(data).subspan(0, 1000));
  std::vector<std::byte> back(4096), tail(1000);
  kit.device->download(*b, 256, back);
  kit.device->download(*b, 4352, tail);
  if (back != data) return std::string("bytes uploaded at offset 256 came back different");
  if (!std::equal(tail.begin(), tail.end(), data.begin())) return std::string("bytes at offset 4352 came back different");
  return std::nullopt;
}

// Three dependent dispatches and two copies in one list: each command sees
// the writes of those before it.
Outcome dispatch_chains_and_copies_see_earlier_writes(const Kit& kit) {
  const std::int64_t n = 1000;
  const kir::Kernel kernel = add_one(n);
  auto loaded = kit.load(kernel);
  const auto x = ramp(n, 0.5f, -10.0f);
  const std::uint64_t bytes = n * sizeof(float);
  auto a = kit.buffer_with(bytes_of(x));
  auto b = kit.device->allocate(bytes);
  const std::uint64_t offset = std::max<std::uint64_t>(kit.target().min_buffer_offset_alignment, 256);
  auto c = kit.device->allocate(offset + bytes);
  auto list = kit.device->create_command_list();
  const kb::BufferBinding in_a{a.get(), 0, bytes}, in_b{b.get(), 0, bytes}, in_c{c.get(), offset, bytes};
  const kb::BufferBinding ab[] = {in_a, in_b}, bc[] = {in_b, in_c}, ca[] = {in_c, in_a};
  list->dispatch(*loaded, kit.grid(kernel), ab);  // b = x + 1
  list->dispatch(*loaded, kit.grid(kernel), bc);  // c = x + 2, bound at an offset
  list->copy(*c, offset, *b, 0, bytes);           // b = x + 2
  list->dispatch(*loaded, kit.grid(kernel), bc);  // c = x + 3
  list->dispatch(*loaded, kit.grid(kernel), ca);  // a = x + 4
  list->finish();
  list->submit();
  const auto got_a = values_of<float>(kit.read(*a));
  std::vector<std::byte> c_bytes(bytes);
  kit.device->download(*c, offset, c_bytes);
  const auto got_c = values_of<float>(c_bytes);
  for (std::int64_t i = 0; i < n; ++i) {
    if (got_a[i] != x[i] + 4.0f) return "a[" + std::to_string(i) + "] is " + std::to_string(got_a[i]) + ", not x + 4";
    if (got_c[i] != x[i] + 3.0f) return "c[" + std::to_string(i) + "] is " + std::to_string(got_c[i]) + ", not x + 3";
  }
  return std::nullopt;
}

// A list recorded once and submitted three times runs three times.
Outcome recorded_lists_replay(const Kit& kit) {
  kir::Kernel k("accumulate");
  const kir::Buf x = k.add_buffer("x", T::f32, kir::Access::read);
  const kir::Buf acc = k.add_buffer("acc", T::f32, kir::Access::read_write);
  k.global_size = 300;
  const kir::Expr i = kir::global_index();
  k.body = {kir::store(acc, i, kir::load(acc, i, T::f32) + kir::load(x, i, T::f32))};
  auto loaded = kit.load(k);
  const auto x_values = ramp(300, 0.25f, 1.0f);
  auto xb = kit.buffer_with(bytes_of(x_values));
  auto ab = kit.buffer_with(bytes_of(std::vector<float>(300, 0.0f)));
  const kb::BufferBinding bindings[] = {{xb.get(), 0, 1200}, {ab.get(), 0, 1200}};
  auto list = kit.device->create_command_list();
  list->dispatch(*loaded, kit.grid(k), bindings);
  list->finish();
  for (int round = 0; round < 3; ++round) list->submit();
  const auto got = values_of<float>(kit.read(*ab));
  for (std::size_t i = 0; i < 300; ++i)
    if (got[i] != 3.0f * x_values[i])
      return "after three submits acc[" + std::to_string(i) + "] is " + std::to_string(got[i]) + ", not 3x";
  return std::nullopt;
}

// Two dispatches of one kernel with different parameter blocks in one list.
Outcome parameter_blocks_are_per_dispatch(const Kit& kit) {
  kir::Kernel k("affine");
  const kir::Buf x = k.add_buffer("x", T::f32, kir::Access::read);
  const kir::Buf y = k.add_buffer("y", T::f32, kir::Access::write);
  k.global_size = 256;
  k.params = {3, -7};
  const kir::Expr i = kir::global_index();
  k.body = {kir::store(y, i, kir::load(x, i, T::f32) * kir::cast(T::f32, kir::param(0)) +
                                 kir::cast(T::f32, kir::param(1)))};
  auto loaded = kit.load(k);
  const auto x_values = ramp(256, 1.0f, -40.0f);
  auto xb = kit.buffer_with(bytes_of(x_values));
  auto y1 = kit.device->allocate(1024), y2 = kit.device->allocate(1024);
  const kb::BufferBinding first[] = {{xb.get(), 0, 1024}, {y1.get(), 0, 1024}};
  const kb::BufferBinding second[] = {{xb.get(), 0, 1024}, {y2.get(), 0, 1024}};
  const std::int32_t p1[] = {3, -7}, p2[] = {-2, 5};
  auto list = kit.device->create_command_list();
  list->dispatch(*loaded, kit.grid(k), first, p1);
  list->dispatch(*loaded, kit.grid(k), second, p2);
  list->finish();
  list->submit();
  const auto g1 = values_of<float>(kit.read(*y1)), g2 = values_of<float>(kit.read(*y2));
  for (std::size_t i = 0; i < 256; ++i) {
    if (g1[i] != x_values[i] * 3.0f - 7.0f) return "the first dispatch's y[" + std::to_string(i) + "] is wrong";
    if (g2[i] != x_values[i] * -2.0f + 5.0f) return "the second dispatch's y[" + std::to_string(i) + "] is wrong";
  }
  return std::nullopt;
}

// A per-workgroup prefix sum in shared memory, with barriers at the top
// level and inside a loop, against the interpreter.
Outcome shared_memory_and_barriers(const Kit& kit) {
  kir::Kernel k("group_prefix");
  const kir::Buf x = k.add_buffer("x", T::f32, kir::Access::read);
  const kir::Buf y = k.add_buffer("y", T::f32, kir::Access::write);
  const kir::Buf groups = k.add_buffer("groups", T::i32, kir::Access::write);
  const kir::Shared sums = k.add_shared("sums", T::f32, 64);
  k.global_size = 64 * 5;
  k.workgroup_size = 64;
  const kir::Expr lid = kir::local_index();
  const kir::Expr offset = kir::var("offset", T::i32);
  k.body = {
      kir::store(sums, lid, kir::load(x, kir::global_index(), T::f32)),
      kir::barrier(),
      kir::declare("offset", T::i32, kir::i32(1)),
      kir::loop("round", kir::i32(0), kir::i32(6),
                {kir::declare("add", T::f32,
                              kir::select(lid >= offset, kir::load(sums, kir::max(lid - offset, kir::i32(0)), T::f32),
                                          kir::f32(0.0))),
                 kir::barrier(), kir::store(sums, lid, kir::load(sums, lid, T::f32) + kir::var("add", T::f32)),
                 kir::barrier(), kir::assign("offset", offset * kir::i32(2))}),
      kir::store(y, kir::global_index(), kir::load(sums, lid, T::f32)),
      kir::store(groups, kir::global_index(), kir::workgroup_index()),
  };
  const std::vector<std::vector<std::byte>> buffers = {bytes_of(ramp(320, 1.0f, -20.0f)),
                                                       bytes_of(std::vector<float>(320)),
                                                       bytes_of(std::vector<std::int32_t>(320))};
  const auto got = kit.run(k, buffers);
  const auto want = interpreted(k, buffers);
  if (auto bad = compare_f32("y", got[1], want[1], 0.0f)) return bad;
  return compare_exact("groups", got[2], want[2]);
}

// Integer semantics (wrapping, truncating division, casts) exactly, and the
// math functions within the backend's tolerance, against the interpreter.
Outcome arithmetic_matches_the_interpreter(const Kit& kit) {
  kir::Kernel k("arithmetic");
  const kir::Buf x = k.add_buffer("x", T::f32, kir::Access::read);
  const kir::Buf n = k.add_buffer("n", T::i32, kir::Access::read);
  const kir::Buf math = k.add_buffer("math", T::f32, kir::Access::write);
  const kir::Buf ints = k.add_buffer("ints", T::i32, kir::Access::write);
  const kir::Buf bits = k.add_buffer("bits", T::u32, kir::Access::write);
  k.global_size = 1000;
  const kir::Expr i = kir::global_index();
  const kir::Expr a = kir::var("a", T::f32), m = kir::var("m", T::i32);
  k.body = {
      kir::declare("a", T::f32, kir::load(x, i, T::f32)),
      kir::declare("m", T::i32, kir::load(n, i, T::i32)),
      kir::store(math, i,
                 kir::exp(-kir::abs(a)) + kir::log(kir::abs(a) + kir::f32(1.0)) + kir::tanh(a) + kir::erf(a) +
                     kir::sqrt(kir::abs(a)) + kir::pow(kir::abs(a), kir::f32(1.5)) * kir::f32(0.01) +
                     kir::min(a, kir::f32(0.5)) - kir::max(a, kir::f32(-0.5)) + kir::floor(a) - kir::ceil(a)),
      kir::store(ints, i,
                 m * kir::i32(2147483) + m / kir::i32(7) - kir::min(m, kir::i32(40)) +
                     kir::select(m >= kir::i32(0), m % kir::i32(5), kir::i32(-1)) + kir::cast(T::i32, a * kir::f32(3.0))),
      kir::store(bits, i, kir::cast(T::u32, m) * kir::u32(2654435761) + kir::u32(12345)),
  };
  std::vector<std::int32_t> n_values(1000);
  for (std::size_t j = 0; j < n_values.size(); ++j) n_values[j] = static_cast<std::int32_t>(j * 37 % 2001) - 1000;
  const std::vector<std::vector<std::byte>> buffers = {
      bytes_of(ramp(1000, 0.125f, -6.0f)), bytes_of(n_values), bytes_of(std::vector<float>(1000)),
      bytes_of(std::vector<std::int32_t>(1000)), bytes_of(std::vector<std::uint32_t>(1000))};
  const auto got = kit.run(k, buffers);
  const auto want = interpreted(k, buffers);
  if (auto bad = compare_exact("ints", got[3], want[3])) return bad;
  if (auto bad = compare_exact("bits", got[4], want[4])) return bad;
  return compare_f32("math", got[2], want[2], kit.tolerance());
}

// f32 values that exercise rounding to f16 and bf16: every f16 value, the
// midpoints between neighbours (ties, to even) and the floats either side
// of them, bf16 ties, the overflow edges, subnormals and infinities.
std::vector<float> rounding_probes() {
  std::vector<float> v;
  auto next = [](float x, int steps) {
    for (int i = 0; i < std::abs(steps); ++i) x = std::nextafter(x, steps > 0 ? INFINITY : -INFINITY);
    return x;
  };
  for (std::uint32_t h = 0; h < 0x10000u; h += 3) {
    const float a = kiln::f16_value(static_cast<std::uint16_t>(h));
    const float b = kiln::f16_value(static_cast<std::uint16_t>(h + 1));
    if (std::isnan(a) || std::isnan(b)) continue;
    const float mid = std::isinf(b) ? 65520.0f * (a < 0 ? -1.0f : 1.0f) : (a + b) / 2;
    v.insert(v.end(), {a, mid, next(mid, 1), next(mid, -1)});
    std::uint32_t tie = (h << 16) | 0x8000u;  // halfway between two bf16 values
    float t;
    std::memcpy(&t, &tie, 4);
    if (!std::isnan(t)) v.insert(v.end(), {t, next(t, 1)});
  }
  v.insert(v.end(), {65504.0f, 65519.996f, 65520.0f, 3.4e38f, -3.4e38f, 1e-8f, 2.9802322e-8f, 2.9802326e-8f, -1e-30f,
                     INFINITY, -INFINITY, 0.0f, -0.0f});
  while (v.size() % 4 != 0) v.push_back(1.0f);
  return v;
}

std::string hex(std::uint16_t bits) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%04x", static_cast<unsigned>(bits));
  return text;
}

// Equal bits, where a NaN equals any NaN (devices keep different payloads).
Outcome compare_16bit(const std::string& what, const std::vector<std::byte>& got, const std::vector<std::byte>& want,
                      T type) {
  const auto g = values_of<std::uint16_t>(got), w = values_of<std::uint16_t>(want);
  auto nan = [&](std::uint16_t bits) {
    return type == T::f16 ? (bits & 0x7fffu) > 0x7c00u : (bits & 0x7fffu) > 0x7f80u;
  };
  for (std::size_t i = 0; i < w.size(); ++i)
    if (g[i] != w[i] && !(nan(g[i]) && nan(w[i])))
      return what + "[" + std::to_string(i) + "] is " + hex(g[i]) + ", the interpreter gives " + hex(w[i]);
  return std::nullopt;
}

// f16 and bf16 buffers: stores round f32 to nearest even and loads widen
// exactly, in scalar and vector accesses, bit for bit as the interpreter does
// (whichever way the target converts f16: TargetDesc::f16_conversion).
Outcome sixteen_bit_storage_matches_the_interpreter(const Kit& kit) {
  const std::vector<float> probes = rounding_probes();
  kir::Kernel k("storage16");
  const kir::Buf x = k.add_buffer("x", T::f32, kir::Access::read);
  const kir::Buf h_in = k.add_buffer("h_in", T::f16, kir::Access::read);
  const kir::Buf b_in = k.add_buffer("b_in", T::bf16, kir::Access::read);
  const kir::Buf h = k.add_buffer("h", T::f16, kir::Access::write);
  const kir::Buf b = k.add_buffer("b", T::bf16, kir::Access::write);
  const kir::Buf wide_h = k.add_buffer("wide_h", T::f32, kir::Access::write);
  const kir::Buf wide_b = k.add_buffer("wide_b", T::f32, kir::Access::write);
  const kir::Buf h4 = k.add_buffer("h4", T::f16, kir::Access::write);
  const kir::Buf wide_b4 = k.add_buffer("wide_b4", T::f32, kir::Access::write);
  const kir::Buf wide_h4 = k.add_buffer("wide_h4", T::f32, kir::Access::write);
  const kir::Buf b4 = k.add_buffer("b4", T::bf16, kir::Access::write);
  k.global_size = static_cast<std::int64_t>(probes.size() / 4);
  const kir::Expr i = kir::global_index();
  std::vector<kir::Stmt> body;
  for (int lane = 0; lane < 4; ++lane) {
    const kir::Expr at = i * kir::i32(4) + kir::i32(lane);
    body.push_back(kir::store(h, at, kir::load(x, at, T::f32)));
    body.push_back(kir::store(b, at, kir::load(x, at, T::f32)));
    body.push_back(kir::store(wide_h, at, kir::load(h_in, at, T::f32)));
    body.push_back(kir::store(wide_b, at, kir::load(b_in, at, T::f32)));
  }
  body.push_back(kir::load_vector({"v0", "v1", "v2", "v3"}, x, i, T::f32));
  body.push_back(kir::load_vector({"w0", "w1", "w2", "w3"}, b_in, i, T::f32));
  body.push_back(kir::load_vector({"u0", "u1", "u2", "u3"}, h_in, i, T::f32));
  std::vector<kir::Expr> v, w, u;
  for (const char* c : {"0", "1", "2", "3"}) {
    v.push_back(kir::var(std::string("v") + c, T::f32));
    w.push_back(kir::var(std::string("w") + c, T::f32));
    u.push_back(kir::var(std::string("u") + c, T::f32));
  }
  body.push_back(kir::store_vector(h4, i, v));
  body.push_back(kir::store_vector(wide_b4, i, w));
  body.push_back(kir::store_vector(wide_h4, i, u));
  body.push_back(kir::store_vector(b4, i, v));
  k.body = std::move(body);
  std::vector<std::uint16_t> halves(probes.size()), brains(probes.size());
  for (std::size_t j = 0; j < probes.size(); ++j) {
    halves[j] = static_cast<std::uint16_t>(j * 40503u);  // patterns of every class, NaNs included
    brains[j] = kiln::bf16_bits(probes[j]);
  }
  const std::vector<std::uint16_t> zero16(probes.size());
  const std::vector<float> zero32(probes.size());
  const std::vector<std::vector<std::byte>> buffers = {
      bytes_of(probes), bytes_of(halves), bytes_of(brains), bytes_of(zero16), bytes_of(zero16),
      bytes_of(zero32), bytes_of(zero32), bytes_of(zero16), bytes_of(zero32), bytes_of(zero32), bytes_of(zero16)};
  const auto got = kit.run(k, buffers);
  const auto want = interpreted(k, buffers);
  if (auto bad = compare_16bit("f16 store", got[3], want[3], T::f16)) return bad;
  if (auto bad = compare_16bit("bf16 store", got[4], want[4], T::bf16)) return bad;
  if (auto bad = compare_16bit("f16 vector store", got[7], want[7], T::f16)) return bad;
  if (auto bad = compare_16bit("bf16 vector store", got[10], want[10], T::bf16)) return bad;
  if (auto bad = compare_f32("f16 load", got[5], want[5], 0.0f)) return bad;
  if (auto bad = compare_f32("bf16 load", got[6], want[6], 0.0f)) return bad;
  if (auto bad = compare_f32("bf16 vector load", got[8], want[8], 0.0f)) return bad;
  return compare_f32("f16 vector load", got[9], want[9], 0.0f);
}

// Within `ulps` f16 units of the interpreter's bits (same sign, finite or
// equal); NaN equals any NaN.
Outcome compare_f16_ulps(const std::string& what, const std::vector<std::byte>& got,
                         const std::vector<std::byte>& want, int ulps) {
  const auto g = values_of<std::uint16_t>(got), w = values_of<std::uint16_t>(want);
  auto nan = [](std::uint16_t bits) { return (bits & 0x7fffu) > 0x7c00u; };
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (g[i] == w[i] || (nan(g[i]) && nan(w[i]))) continue;
    const bool same_sign = (g[i] & 0x8000u) == (w[i] & 0x8000u) || ((g[i] | w[i]) & 0x7fffu) == 0;
    if (!same_sign || nan(g[i]) || nan(w[i]) || std::abs(int{g[i] & 0x7fff} - int{w[i] & 0x7fff}) > ulps)
      return what + "[" + std::to_string(i) + "] is " + hex(g[i]) + ", the interpreter gives " + hex(w[i]) +
             " (within " + std::to_string(ulps) + " f16 units allowed)";
  }
  return std::nullopt;
}

// f16 arithmetic (kir f16 values, computed natively where the language has
// an f16 type, else in f32 rounded after every op): + - * min max neg abs,
// select and a chain of them bit for bit as the interpreter rounds them, on
// finite f16 operands of every magnitude (subnormals, overflow); division
// within one unit and functions within two (a device's f32 functions differ
// from the C library's by a few f32 units, which may cross an f16 rounding
// boundary).
Outcome f16_arithmetic_matches_the_interpreter(const Kit& kit) {
  constexpr std::size_t n = 4096;
  kir::Kernel k("f16_arithmetic");
  const kir::Buf a = k.add_buffer("a", T::f16, kir::Access::read);
  const kir::Buf b = k.add_buffer("b", T::f16, kir::Access::read);
  constexpr int outputs = 9;
  std::vector<kir::Buf> out;
  for (int o = 0; o < outputs; ++o) out.push_back(k.add_buffer("o" + std::to_string(o), T::f16, kir::Access::write));
  k.global_size = n;
  const kir::Expr i = kir::global_index();
  const kir::Expr ha = kir::cast(T::f16, kir::load(a, i, T::f32)), hb = kir::cast(T::f16, kir::load(b, i, T::f32));
  const kir::Expr values[outputs] = {ha + hb,
                                     ha - hb,
                                     ha * hb,
                                     kir::min(ha, hb),
                                     kir::max(ha, hb),
                                     -kir::abs(ha),
                                     kir::select(ha < hb, ha * hb - ha, hb - ha * kir::cast(T::f16, kir::f32(0.75))),
                                     ha / hb,
                                     kir::tanh(ha) + kir::sqrt(kir::abs(hb))};
  for (int o = 0; o < outputs; ++o) k.body.push_back(kir::store(out[o], i, kir::cast(T::f32, values[o])));
  // Finite f16 operands of every exponent: a fixed pseudo-random walk over
  // the bit patterns, skipping infinities and NaNs.
  std::vector<std::uint16_t> av(n), bv(n);
  std::uint32_t state = 12345;
  auto next_finite = [&] {
    for (;;) {
      state = state * 1664525u + 1013904223u;
      const auto bits = static_cast<std::uint16_t>(state >> 16);
      if ((bits & 0x7c00u) != 0x7c00u) return bits;
    }
  };
  for (std::size_t j = 0; j < n; ++j) {
    av[j] = next_finite();
    bv[j] = next_finite();
  }
  // Neighbours and ties: a + b halfway between f16 values, products near the overflow edge.
  av[0] = kiln::f16_bits(2048.0f), bv[0] = kiln::f16_bits(1.0f);
  av[1] = kiln::f16_bits(300.0f), bv[1] = kiln::f16_bits(300.0f);
  av[2] = kiln::f16_bits(1.0f + 0x1p-10f), bv[2] = kiln::f16_bits(1.0f + 0x1p-10f);
  av[3] = 0x0001, bv[3] = 0x8001;
  std::vector<std::vector<std::byte>> buffers = {bytes_of(av), bytes_of(bv)};
  for (int o = 0; o < outputs; ++o) buffers.push_back(bytes_of(std::vector<std::uint16_t>(n)));
  const auto got = kit.run(k, buffers);
  const auto want = interpreted(k, buffers);
  const char* names[outputs] = {"a + b", "a - b", "a * b", "min", "max", "-abs(a)", "select chain", "a / b",
                                "tanh(a) + sqrt(|b|)"};
  for (int o = 0; o < outputs; ++o) {
    const int ulps = o < 7 ? 0 : o == 7 ? 1 : 2;
    if (auto bad = compare_f16_ulps(names[o], got[o + 2], want[o + 2], ulps)) return bad;
  }
  return std::nullopt;
}

// Matrix fragments held by one lane (the emulation every language renders):
// a GEMM with edge tiles, inputs rounded to TF32, f16 and bf16, within the
// bound of the f32 sum against the interpreter's exact one
// (docs/precision.md).
Outcome matrix_fragments_match_the_interpreter(const Kit& kit) {
  const int m = 40, n = 56, k = 20;
  std::vector<float> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(k) * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i)) * 2.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.23f * static_cast<float>(i)) * 2.0f;
  for (const kir::MatrixPrecision precision :
       {kir::MatrixPrecision::tf32, kir::MatrixPrecision::f16, kir::MatrixPrecision::bf16}) {
    const kir::Kernel kernel = kiln::test::fragment_gemm(m, n, k, 1, 4, precision);
    const std::vector<std::vector<std::byte>> buffers = {bytes_of(a), bytes_of(b),
                                                         bytes_of(std::vector<float>(static_cast<std::size_t>(m) * n))};
    const auto got = kit.run(kernel, buffers);
    const auto want = interpreted(kernel, buffers);
    // |f32 sum - exact| <= k * 2^-24 * sum |a b| <= 20 * 6e-8 * 80: 1e-4.
    if (auto bad = compare_f32(std::string("y (") + kir::matrix_precision_name(precision) + ")", got[2], want[2], 2e-4f))
      return bad;
  }
  // The target's matrix instructions (tensor cores, MFMA), in whole warps
  // or wavefronts, with edge tiles: the lanes' layouts and the instruction
  // against the interpreter. The hardware's summation order and rounding
  // are its own: the bound is 15 times the f32 one (3e-3 against 2e-4).
  for (const kiln::backend::MatrixShape& shape : kit.target().matrix_shapes) {
    const kir::MatrixPrecision precision = kir::matrix_precision_of(shape.inputs).value();
    const kir::Kernel kernel = kiln::test::fragment_gemm(m, n, k, shape.lanes, shape.lanes, precision,
                                                         kir::ScalarType::f32, {shape.m, shape.n, shape.k});
    const std::vector<std::vector<std::byte>> buffers = {bytes_of(a), bytes_of(b),
                                                         bytes_of(std::vector<float>(static_cast<std::size_t>(m) * n))};
    const auto got = kit.run(kernel, buffers);
    const auto want = interpreted(kernel, buffers);
    if (auto bad = compare_f32("y (" + kiln::backend::matrix_shape_name(shape) + ")", got[2], want[2], 3e-3f)) return bad;
  }
  return std::nullopt;
}

// f16 and bf16 texel buffers (targets with 16-bit texel views): whole
// texels, their components and width-1 elements widen exactly, as the
// interpreter widens them.
Outcome sixteen_bit_texel_buffers_match_the_interpreter(const Kit& kit) {
  if (!kit.target().texel_16bit) throw Skip{"the target has no 16-bit texel buffers"};
  const std::int64_t n = 1024;
  kir::Kernel k("texel16");
  const kir::Buf b4 = k.add_buffer("b4", T::bf16, kir::Access::read);
  const kir::Buf h4 = k.add_buffer("h4", T::f16, kir::Access::read);
  const kir::Buf b1 = k.add_buffer("b1", T::bf16, kir::Access::read);
  const kir::Buf h1 = k.add_buffer("h1", T::f16, kir::Access::read);
  const kir::Buf y = k.add_buffer("y", T::f32, kir::Access::write);
  k.buffers[0].texel_width = k.buffers[1].texel_width = 4;
  k.buffers[2].texel_width = k.buffers[3].texel_width = 1;
  k.global_size = n;
  const kir::Expr i = kir::global_index();
  const kir::Expr texel = i / kir::i32(4);
  std::vector<kir::Stmt> body = {kir::load_vector({"b0", "b1", "b2", "b3"}, b4, texel, T::f32),
                                 kir::load_vector({"h0", "h1", "h2", "h3"}, h4, texel, T::f32)};
  // y[8i + 0..3]: the bf16 texel's lanes; 4..7 the f16 one's; then scalars.
  auto out = [&](int slot) { return i * kir::i32(8) + kir::i32(slot); };
  const kir::Expr lane = i % kir::i32(4);
  body.push_back(kir::store(y, out(0), kir::select(kir::eq(lane, kir::i32(0)), kir::var("b0", T::f32), kir::var("b3", T::f32))));
  body.push_back(kir::store(y, out(1), kir::select(kir::eq(lane, kir::i32(1)), kir::var("b1", T::f32), kir::var("b2", T::f32))));
  body.push_back(kir::store(y, out(2), kir::select(kir::eq(lane, kir::i32(2)), kir::var("h2", T::f32), kir::var("h0", T::f32))));
  body.push_back(kir::store(y, out(3), kir::select(kir::eq(lane, kir::i32(3)), kir::var("h3", T::f32), kir::var("h1", T::f32))));
  body.push_back(kir::store(y, out(4), kir::load(b4, i, T::f32)));
  body.push_back(kir::store(y, out(5), kir::load(h4, i, T::f32)));
  body.push_back(kir::store(y, out(6), kir::load(b1, i, T::f32)));
  body.push_back(kir::store(y, out(7), kir::load(h1, i, T::f32)));
  k.body = std::move(body);
  // Finite patterns of every other class (normal, subnormal, zero, signs).
  std::vector<std::uint16_t> halves(n), brains(n), halves1(n), brains1(n);
  auto finite = [](std::uint32_t bits, std::uint16_t exponent) {
    const auto h = static_cast<std::uint16_t>(bits);
    return (h & exponent) == exponent ? static_cast<std::uint16_t>(h & ~0x4000u) : h;
  };
  for (std::int64_t j = 0; j < n; ++j) {
    const auto u = static_cast<std::uint32_t>(j);
    halves[j] = finite(u * 40503u, 0x7c00u);
    brains[j] = finite(u * 2654435761u >> 7, 0x7f80u);
    halves1[j] = finite(u * 7919u + 3u, 0x7c00u);
    brains1[j] = finite(u * 104729u + 5u, 0x7f80u);
  }
  const std::vector<std::vector<std::byte>> buffers = {bytes_of(brains), bytes_of(halves), bytes_of(brains1),
                                                       bytes_of(halves1), bytes_of(std::vector<float>(8 * n))};
  const auto got = kit.run(k, buffers);
  const auto want = interpreted(k, buffers);
  return compare_f32("16-bit texel loads", got[4], want[4], 0.0f);
}

Outcome timestamps_measure_the_work(const Kit& kit) {
  if (!kit.target().timestamps) throw Skip{"the device has no timestamps"};
  const kir::Kernel kernel = add_one(1 << 16);
  auto loaded = kit.load(kernel);
  auto a = kit.device->allocate(1 << 18), b = kit.device->allocate(1 << 18);
  const kb::BufferBinding bindings[] = {{a.get(), 0, 1 << 18}, {b.get(), 0, 1 << 18}};
  auto list = kit.device->create_command_list();
  for (int k = 0; k < 4; ++k) list->dispatch(*loaded, kit.grid(kernel), bindings);
  list->finish();
  list->submit();
  const std::optional<double> ms = list->last_device_ms();
  if (!ms || !(*ms > 0.0)) return std::string("the target has timestamps, but the submit measured none");
  return std::nullopt;
}

// An empty buffer, and a transfer larger than any staging chunk (CUDA 16 MiB,
// Vulkan 32 MiB) that comes back intact.
Outcome large_and_empty_transfers(const Kit& kit) {
  auto empty = kit.device->allocate(0);
  if (empty->size() != 0) return "allocate(0) gave a buffer of " + std::to_string(empty->size()) + " bytes";
  kit.device->upload(*empty, 0, {});
  kit.device->download(*empty, 0, {});
  const std::size_t bytes = std::min<std::uint64_t>(40u << 20, kit.target().max_buffer_bytes);
  std::vector<std::byte> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  auto big = kit.buffer_with(data);
  if (kit.read(*big) != data) return "a " + std::to_string(bytes) + "-byte upload came back different";
  return std::nullopt;
}

// Texel buffers of 1 and 4 floats per texel, bound at offsets inside one
// buffer and read as whole texels, components and scalars (the subgroup
// GEMM's loads), beside a storage buffer.
Outcome texel_buffers_bind_at_offsets(const Kit& kit) {
  const std::int64_t n = 100;
  kir::Kernel k("texel_sum");
  const kir::Buf t4 = k.add_texel_buffer("t4", 4);
  const kir::Buf t1 = k.add_texel_buffer("t1", 1);
  const kir::Buf y = k.add_buffer("y", T::f32, kir::Access::write);
  k.global_size = n;
  const kir::Expr i = kir::global_index();
  k.body = {kir::load_vector({"q0", "q1", "q2", "q3"}, t4, i, T::f32),
            kir::store(y, i,
                       kir::var("q0", T::f32) + kir::f32(10.0) * kir::var("q3", T::f32) +
                           kir::f32(100.0) * kir::load(t1, i, T::f32) +
                           kir::f32(1000.0) * kir::load(t4, i * kir::i32(4) + kir::i32(2), T::f32))};
  auto loaded = kit.load(k);
  const std::uint64_t align = std::max<std::uint64_t>(kit.target().min_buffer_offset_alignment, 256);
  const std::uint64_t first = align, second = first + (4 * n * sizeof(float) + align - 1) / align * align;
  const auto v4 = ramp(4 * n, 0.5f, 1.0f), v1 = ramp(n, 0.25f, -3.0f);
  auto inputs = kit.device->allocate(second + n * sizeof(float));
  kit.device->upload(*inputs, first, bytes_of(v4));
  kit.device->upload(*inputs, second, bytes_of(v1));
  auto out = kit.device->allocate(n * sizeof(float));
  const kb::BufferBinding bindings[] = {{inputs.get(), first, 4 * n * sizeof(float)},
                                        {inputs.get(), second, n * sizeof(float)},
                                        {out.get(), 0, n * sizeof(float)}};
  auto list = kit.device->create_command_list();
  list->dispatch(*loaded, kit.grid(k), bindings);
  list->finish();
  list->submit();
  const auto got = values_of<float>(kit.read(*out));
  for (std::int64_t e = 0; e < n; ++e) {
    const float want = v4[4 * e] + 10.0f * v4[4 * e + 3] + 100.0f * v1[e] + 1000.0f * v4[4 * e + 2];
    if (std::fabs(got[e] - want) > 1e-6f * std::fabs(want) + 1e-6f)
      return "y[" + std::to_string(e) + "] is " + std::to_string(got[e]) + ", not " + std::to_string(want);
  }
  return std::nullopt;
}

// Workgroups on a two-dimensional grid each take their own elements, and a
// list of 300 dispatches runs them all, in order.
Outcome many_dispatches_on_a_two_dimensional_grid(const Kit& kit) {
  kir::Kernel k("increment");
  const kir::Buf x = k.add_buffer("x", T::f32, kir::Access::read_write);
  k.global_size = 1024;
  k.workgroup_size = 64;
  const kir::Expr i = kir::global_index();
  k.body = {kir::store(x, i, kir::load(x, i, T::f32) + kir::f32(1.0))};
  auto loaded = kit.load(k);
  auto b = kit.buffer_with(bytes_of(std::vector<float>(1024, 0.0f)));
  const kb::BufferBinding bindings[] = {{b.get(), 0, 4096}};
  auto list = kit.device->create_command_list();
  const int dispatches = 300;
  for (int d = 0; d < dispatches; ++d) list->dispatch(*loaded, {4, 4, 1}, bindings);  // 16 groups of 64
  list->finish();
  list->submit();
  const auto got = values_of<float>(kit.read(*b));
  for (std::size_t e = 0; e < got.size(); ++e)
    if (got[e] != static_cast<float>(dispatches))
      return "element " + std::to_string(e) + " is " + std::to_string(got[e]) + " after " +
             std::to_string(dispatches) + " dispatches on a 4x4 grid";
  return std::nullopt;
}

template <class Fn> Outcome expect_error(Fn&& fn, kiln::ErrorKind kind, const std::string& what) {
  try {
    fn();
  } catch (const kiln::Error& e) {
    if (e.kind() == kind) return std::nullopt;
    return what + " threw " + std::string(kiln::error_kind_name(e.kind())) + ": " + e.what();
  }
  return what + " did not throw";
}

// Errors name the problem as kiln::Errors of the right kind, and the device
// runs kernels correctly afterwards.
Outcome errors_leave_the_device_usable(const Kit& kit) {
  const kir::Kernel kernel = add_one(64);
  auto loaded = kit.load(kernel);
  auto a = kit.device->allocate(256), b = kit.device->allocate(256);
  const kb::BufferBinding one[] = {{a.get(), 0, 256}};
  Outcome bad = expect_error(
      [&] {
        auto list = kit.device->create_command_list();
        list->dispatch(*loaded, kit.grid(kernel), one);
        list->finish();
        list->submit();
      },
      kiln::ErrorKind::InvalidArgument, "a dispatch with one binding for a kernel of two");
  if (bad) return bad;
  const kb::BufferBinding past_end[] = {{a.get(), 0, 256}, {b.get(), 0, 512}};
  bad = expect_error([&] { kit.device->create_command_list()->dispatch(*loaded, kit.grid(kernel), past_end); },
                     kiln::ErrorKind::InvalidArgument, "a binding past the end of its buffer");
  if (bad) return bad;
  bad = expect_error(
      [&] {
        auto list = kit.device->create_command_list();
        list->copy(*a, 128, *b, 0, 256);
      },
      kiln::ErrorKind::InvalidArgument, "a copy reading past the end of its buffer");
  if (bad) return bad;
  const std::uint64_t too_much =
      std::max<std::uint64_t>(kit.target().device_memory_bytes, std::uint64_t{1} << 40) * 64;
  bad = expect_error([&] { kit.device->allocate(too_much); }, kiln::ErrorKind::OutOfMemory,
                     "allocating " + std::to_string(too_much) + " bytes");
  if (bad) return bad;
  bad = expect_error([&] { kit.backend.create_device(1000); }, kiln::ErrorKind::NotFound, "create_device(1000)");
  if (bad) return bad;
  bad = expect_error([&] { kit.backend.create_device(-1); }, kiln::ErrorKind::NotFound, "create_device(-1)");
  if (bad) return bad;
  const auto out = kit.run(kernel, {bytes_of(ramp(64, 1.0f, 0.0f)), bytes_of(std::vector<float>(64))});
  const auto y = values_of<float>(out[1]);
  for (std::size_t i = 0; i < 64; ++i)
    if (y[i] != static_cast<float>(i % 97) + 1.0f) return std::string("after the errors a dispatch computed wrong values");
  return std::nullopt;
}

// Misusing a command list or a kernel's limits is InvalidArgument (a
// workgroup wider than the device runs: Unsupported), named, never a crash.
Outcome recording_errors_are_invalid_arguments(const Kit& kit) {
  const kir::Kernel kernel = add_one(64);
  auto loaded = kit.load(kernel);
  auto a = kit.device->allocate(4096), b = kit.device->allocate(4096);
  const kb::BufferBinding two[] = {{a.get(), 0, 256}, {b.get(), 0, 256}};
  auto list = kit.device->create_command_list();
  list->dispatch(*loaded, kit.grid(kernel), two);
  Outcome bad = expect_error([&] { list->submit(); }, kiln::ErrorKind::InvalidArgument, "submit() before finish()");
  if (bad) return bad;
  list->finish();
  bad = expect_error([&] { list->finish(); }, kiln::ErrorKind::InvalidArgument, "finish() twice");
  if (bad) return bad;
  bad = expect_error([&] { list->dispatch(*loaded, kit.grid(kernel), two); }, kiln::ErrorKind::InvalidArgument,
                     "a dispatch after finish()");
  if (bad) return bad;
  bad = expect_error([&] { list->copy(*a, 0, *b, 0, 16); }, kiln::ErrorKind::InvalidArgument, "a copy after finish()");
  if (bad) return bad;
  list->submit();
  auto fresh = kit.device->create_command_list();
  if (kit.target().min_buffer_offset_alignment > 4) {
    const kb::BufferBinding misaligned[] = {{a.get(), 4, 256}, {b.get(), 0, 256}};
    bad = expect_error([&] { fresh->dispatch(*loaded, kit.grid(kernel), misaligned); },
                       kiln::ErrorKind::InvalidArgument, "a binding at offset 4");
    if (bad) return bad;
  }
  const std::uint32_t too_many = kit.target().max_workgroup_count[1] + 1;
  bad = expect_error([&] { fresh->dispatch(*loaded, {1, too_many, 1}, two); }, kiln::ErrorKind::InvalidArgument,
                     std::to_string(too_many) + " workgroups in y");
  if (bad) return bad;
  fresh->finish();
  fresh->submit();  // nothing recorded: an empty list runs
  kb::KernelSource source = kiln::render::make_kernel_source(kernel, kit.backend.language_for(kit.target()));
  const kb::KernelBinary binary = kit.backend.compiler().compile(source, kit.target());
  source.workgroup_size = kit.target().max_workgroup_invocations + 1;
  return expect_error([&] { kit.device->load_kernel(source, binary); }, kiln::ErrorKind::Unsupported,
                      "loading a kernel of " + std::to_string(source.workgroup_size) + " invocations per workgroup");
}

struct Check {
  const char* name;
  Outcome (*run)(const Kit&);
};
const Check kChecks[] = {
    {"buffers_round_trip_at_offsets", buffers_round_trip_at_offsets},
    {"dispatch_chains_and_copies_see_earlier_writes", dispatch_chains_and_copies_see_earlier_writes},
    {"recorded_lists_replay", recorded_lists_replay},
    {"parameter_blocks_are_per_dispatch", parameter_blocks_are_per_dispatch},
    {"shared_memory_and_barriers", shared_memory_and_barriers},
    {"arithmetic_matches_the_interpreter", arithmetic_matches_the_interpreter},
    {"sixteen_bit_storage_matches_the_interpreter", sixteen_bit_storage_matches_the_interpreter},
    {"f16_arithmetic_matches_the_interpreter", f16_arithmetic_matches_the_interpreter},
    {"matrix_fragments_match_the_interpreter", matrix_fragments_match_the_interpreter},
    {"timestamps_measure_the_work", timestamps_measure_the_work},
    {"errors_leave_the_device_usable", errors_leave_the_device_usable},
    {"large_and_empty_transfers", large_and_empty_transfers},
    {"texel_buffers_bind_at_offsets", texel_buffers_bind_at_offsets},
    {"sixteen_bit_texel_buffers_match_the_interpreter", sixteen_bit_texel_buffers_match_the_interpreter},
    {"many_dispatches_on_a_two_dimensional_grid", many_dispatches_on_a_two_dimensional_grid},
    {"recording_errors_are_invalid_arguments", recording_errors_are_invalid_arguments},
};

void run_check(const kb::Backend& backend, const Check& check) {
  static std::map<std::string, std::shared_ptr<kb::Device>> devices;  // one per backend for the suite
  auto& device = devices[backend.name()];
  if (!device) device = backend.create_device(0);
  const Kit kit{backend, device};
  Outcome outcome;
  try {
    outcome = check.run(kit);
  } catch (const Skip& skip) {
    BOOST_TEST_MESSAGE(backend.name() << "/" << check.name << " skipped: " << skip.reason);
    return;
  } catch (const kiln::Error& e) {
    outcome = std::string("threw ") + std::string(kiln::error_kind_name(e.kind())) + ": " + e.what();
  }
  const auto known_failures = backend.conformance_expectations().known_failures;
  if (const auto known = known_failures.find(check.name); known != known_failures.end()) {
    BOOST_TEST(outcome.has_value(), backend.name() << "/" << check.name
                                                   << " now passes: remove it from the backend's known failures "
                                                      "(conformance_expectations; listed because: "
                                                   << known->second << ")");
    if (outcome) BOOST_TEST_MESSAGE("expected failure (" << known->second << "): " << *outcome);
    return;
  }
  BOOST_TEST(!outcome.has_value(), backend.name() << "/" << check.name << ": " << outcome.value_or(""));
}

// Backends that ran here (init_suite): with none, the suite reports a skip
// (exit 77, which Meson counts as skipped), not a pass.
int backends_run = 0;

bool init_suite() {
  auto& master = boost::unit_test::framework::master_test_suite();
  master.p_name.value = "backend_conformance";
  for (const kb::Backend* backend : kb::all_backends()) {
    if (auto reason = backend->unavailable_reason(); reason || backend->enumerate_devices().empty()) {
      std::cout << "backend_conformance: '" << backend->name() << "' not run here: " << reason.value_or("no devices")
                << "\n";
      continue;
    }
    ++backends_run;
    auto* suite = BOOST_TEST_SUITE(backend->name());
    for (const Check& check : kChecks)
      suite->add(boost::unit_test::make_test_case([backend, &check] { run_check(*backend, check); }, check.name,
                                                  __FILE__, __LINE__));
    master.add(suite);
  }
  if (backends_run == 0) std::cout << "backend_conformance: no backend can run kernels here\n";
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  const int status = boost::unit_test::unit_test_main(&init_suite, argc, argv);
  // With no backend the test tree is empty, which Boost calls a setup error.
  return backends_run == 0 ? 77 : status;
}
