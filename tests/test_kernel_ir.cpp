#define BOOST_TEST_MODULE kernel_ir
#include <kiln/error.h>

#include <bit>
#include <boost/test/unit_test.hpp>

#include <kiln/float16.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "src/kernel/f16_arithmetic.h"
#include "src/kernel/interpreter.h"
#include "src/kernel/ir.h"

using namespace kiln::kir;
using kiln::Error;
using kiln::ErrorKind;

namespace {

constexpr ScalarType F = ScalarType::f32;
constexpr ScalarType I = ScalarType::i32;
constexpr ScalarType U = ScalarType::u32;
constexpr ScalarType B = ScalarType::boolean;

// Runs `fn` and returns the message of the kiln::Error(Internal) it throws.
std::string internal_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    BOOST_TEST(static_cast<int>(e.kind()) == static_cast<int>(ErrorKind::Internal));
    return e.what();
  }
  BOOST_FAIL("expected kiln::Error(Internal)");
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

template <class T>
std::span<std::byte> bytes(std::vector<T>& v) {
  return std::as_writable_bytes(std::span<T>(v));
}

void run(const Kernel& k, std::vector<std::span<std::byte>> buffers) { interpret(k, buffers); }

bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// y[i] = f(x[i]) over `inputs`, returned as a vector.
template <class In, class Out>
std::vector<Out> map_kernel(ScalarType in_type, ScalarType out_type, const std::vector<In>& inputs,
                            const std::function<Expr(Expr)>& f) {
  Kernel k("map");
  Buf x = k.add_buffer("x", in_type, Access::read);
  Buf y = k.add_buffer("y", out_type, Access::write);
  k.global_size = static_cast<std::int64_t>(inputs.size());
  k.body.push_back(store(y, global_index(), f(load(x, global_index(), in_type))));
  std::vector<In> in = inputs;
  std::vector<Out> out(inputs.size());
  run(k, {bytes(in), bytes(out)});
  return out;
}

// c[i] = f(a[i], b[i]).
template <class T, class Out>
std::vector<Out> zip_kernel(ScalarType type, ScalarType out_type, const std::vector<T>& a, const std::vector<T>& b,
                            const std::function<Expr(Expr, Expr)>& f) {
  Kernel k("zip");
  Buf x = k.add_buffer("a", type, Access::read);
  Buf y = k.add_buffer("b", type, Access::read);
  Buf z = k.add_buffer("c", out_type, Access::write);
  k.global_size = static_cast<std::int64_t>(a.size());
  k.body.push_back(store(z, global_index(), f(load(x, global_index(), type), load(y, global_index(), type))));
  std::vector<T> av = a, bv = b;
  std::vector<Out> out(a.size());
  run(k, {bytes(av), bytes(bv), bytes(out)});
  return out;
}

const std::vector<float> kFloats = {0.0f,
                                    -0.0f,
                                    0.5f,
                                    -0.5f,
                                    1.0f,
                                    -1.0f,
                                    2.75f,
                                    -3.25f,
                                    10.0f,
                                    -20.0f,
                                    1e-3f,
                                    88.0f,
                                    -100.0f,
                                    1e30f,
                                    std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity(),
                                    std::numeric_limits<float>::quiet_NaN()};

}  // namespace

BOOST_AUTO_TEST_SUITE(helpers)

BOOST_AUTO_TEST_CASE(expressions_are_typed) {
  BOOST_TEST(static_cast<int>((f32(1) + f32(2)).type()) == static_cast<int>(F));
  BOOST_TEST(static_cast<int>((i32(1) < i32(2)).type()) == static_cast<int>(B));
  BOOST_TEST(static_cast<int>(eq(boolean(true), boolean(false)).type()) == static_cast<int>(B));
  BOOST_TEST(static_cast<int>(cast(U, f32(1)).type()) == static_cast<int>(U));
  BOOST_TEST(static_cast<int>(global_index().type()) == static_cast<int>(I));
  BOOST_TEST(static_cast<int>(select(boolean(true), u32(1), u32(2)).type()) == static_cast<int>(U));
  BOOST_TEST(f32(0.1)->fvalue == static_cast<double>(0.1f));  // constants are rounded to f32
}

BOOST_AUTO_TEST_CASE(type_errors_name_the_operation_and_types) {
  std::string m = internal_error([] { (void)(f32(1) + i32(1)); });
  BOOST_TEST(contains(m, "'add'"));
  BOOST_TEST(contains(m, "f32 and i32"));
  m = internal_error([] { (void)exp(i32(1)); });
  BOOST_TEST(contains(m, "'exp'"));
  BOOST_TEST(contains(m, "i32"));
  BOOST_TEST(contains(internal_error([] { (void)(f32(1) % f32(2)); }), "'mod'"));
  BOOST_TEST(contains(internal_error([] { (void)pow(i32(1), i32(2)); }), "'pow'"));
  BOOST_TEST(contains(internal_error([] { (void)(f32(1) && f32(2)); }), "'and'"));
  BOOST_TEST(contains(internal_error([] { (void)-u32(1); }), "'neg'"));
  BOOST_TEST(contains(internal_error([] { (void)select(i32(1), f32(1), f32(2)); }), "condition must be bool"));
  BOOST_TEST(contains(internal_error([] { (void)select(boolean(true), f32(1), i32(2)); }), "f32 and i32"));
  BOOST_TEST(contains(internal_error([] { (void)load(Buf{0}, f32(0), F); }), "index must be i32 or u32"));
  BOOST_TEST(contains(internal_error([] { (void)load(Buf{}, i32(0), F); }), "invalid buffer"));
  BOOST_TEST(contains(internal_error([] { (void)i32(std::int64_t{1} << 31); }), "out of range"));
  BOOST_TEST(contains(internal_error([] { (void)u32(-1); }), "out of range"));
  BOOST_TEST(contains(internal_error([] { (void)var("2x", F); }), "'2x' is not an identifier"));
  BOOST_TEST(contains(internal_error([] { (void)var("a__b", F); }), "not an identifier"));
  BOOST_TEST(contains(internal_error([] { (void)(Expr() + f32(1)); }), "null expression"));
}

BOOST_AUTO_TEST_CASE(statement_errors) {
  BOOST_TEST(contains(internal_error([] { (void)declare("x", F, i32(0)); }), "initialised with a i32"));
  BOOST_TEST(contains(internal_error([] { (void)loop("k", i32(0), i32(4), {}, 0); }), "step"));
  BOOST_TEST(contains(internal_error([] { (void)loop("k", f32(0), i32(4), {}); }), "bounds must be i32"));
  BOOST_TEST(contains(internal_error([] { (void)branch(i32(1), {}); }), "condition must be bool"));
  BOOST_TEST(contains(internal_error([] { (void)store(Buf{0}, f32(0), f32(0)); }), "index must be i32 or u32"));
}

BOOST_AUTO_TEST_CASE(add_buffer_checks_names_and_types) {
  Kernel k("k");
  Buf a = k.add_buffer("a", F, Access::read);
  Buf b = k.add_buffer("b", I, Access::write);
  BOOST_TEST(a.index == 0);
  BOOST_TEST(b.index == 1);
  BOOST_TEST(contains(internal_error([&] { k.add_buffer("a", F, Access::read); }), "duplicate buffer name 'a'"));
  BOOST_TEST(contains(internal_error([&] { k.add_buffer("x.y", F, Access::read); }), "'x.y' is not an identifier"));
  // Bools are one byte in buffers, but shared arrays hold 4-byte elements only.
  BOOST_TEST(k.add_buffer("flag", B, Access::read).index == 2);
  BOOST_TEST(contains(internal_error([&] { k.add_shared("flags", B, 4); }), "bool"));
  BOOST_TEST(contains(internal_error([&] { k.add_shared("wide", ScalarType::i64, 4); }), "i64"));
  BOOST_TEST(k.buffers.size() == 3u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(verification)

namespace {

Kernel base_kernel() {
  Kernel k("copy");
  k.add_buffer("x", F, Access::read);
  k.add_buffer("y", F, Access::write);
  k.global_size = 16;
  return k;
}

std::string verify_error(const Kernel& k) {
  return internal_error([&] { verify(k); });
}

}  // namespace

BOOST_AUTO_TEST_CASE(accepts_a_well_formed_kernel) {
  Kernel k = base_kernel();
  Buf x{0}, y{1};
  Expr i = global_index();
  k.body = {
      declare("acc", F, f32(0)),
      loop("k", i32(0), i32(4),
           {declare("t", F, load(x, (i + var("k", I)) % i32(16), F)), assign("acc", var("acc", F) + var("t", F))}),
      // Sibling scopes may reuse names.
      loop("k", i32(0), i32(2), {declare("t", I, var("k", I))}),
      branch(var("acc", F) > f32(0), {store(y, i, var("acc", F))}, {store(y, i, f32(0))}),
  };
  BOOST_CHECK_NO_THROW(verify(k));
}

BOOST_AUTO_TEST_CASE(kernel_level_errors) {
  Kernel k = base_kernel();
  k.global_size = 0;
  BOOST_TEST(contains(verify_error(k), "global_size 0 is outside (0, 2^31)"));
  k.global_size = std::int64_t{1} << 31;
  BOOST_TEST(contains(verify_error(k), "outside (0, 2^31)"));
  k.global_size = 16;
  k.workgroup_size = 0;
  BOOST_TEST(contains(verify_error(k), "workgroup_size is 0"));

  for (const char* bad : {"conv/relu", "1st", "", "a__b", "_x"}) {
    Kernel named = base_kernel();
    named.name = bad;
    BOOST_TEST(contains(verify_error(named), "is not an identifier"), bad);
  }
  for (const char* reserved : {"main", "float", "exp", "expf", "tanh", "max", "template"}) {
    Kernel named = base_kernel();
    named.name = reserved;
    BOOST_TEST(contains(verify_error(named), "reserved"), reserved);
  }
  Kernel dup = base_kernel();
  dup.buffers.push_back({"x", F, Access::read});
  BOOST_TEST(contains(verify_error(dup), "duplicate buffer name 'x'"));
}

BOOST_AUTO_TEST_CASE(messages_name_kernel_problem_and_location) {
  Kernel k = base_kernel();
  k.body = {loop("k", i32(0), i32(4), {store(Buf{1}, var("j", I), f32(0))})};
  const std::string m = verify_error(k);
  BOOST_TEST(contains(m, "kernel 'copy'"));
  BOOST_TEST(contains(m, "variable 'j' is used before its declaration or outside its scope"));
  BOOST_TEST(contains(m, "body[0] > for k > body[0]"));
}

BOOST_AUTO_TEST_CASE(variable_scoping) {
  Kernel k = base_kernel();
  // Declared inside a branch, used after it.
  k.body = {branch(boolean(true), {declare("t", F, f32(1))}), store(Buf{1}, global_index(), var("t", F))};
  BOOST_TEST(contains(verify_error(k), "variable 't' is used before"));
  // A loop variable does not outlive its loop.
  k.body = {loop("k", i32(0), i32(2), {}), store(Buf{1}, var("k", I), f32(0))};
  BOOST_TEST(contains(verify_error(k), "variable 'k' is used before"));
  // Used in its own initialiser.
  k.body = {declare("t", F, var("t", F))};
  BOOST_TEST(contains(verify_error(k), "variable 't' is used before"));
  // Shadowing is rejected (it would silently change meaning between languages).
  k.body = {declare("t", F, f32(0)), loop("t", i32(0), i32(2), {})};
  BOOST_TEST(contains(verify_error(k), "'t' is already declared"));
  // Declared with one type, used as another.
  k.body = {declare("t", F, f32(0)), store(Buf{1}, var("t", I), f32(0))};
  BOOST_TEST(contains(verify_error(k), "used as i32 but declared f32"));
  // Assignment checks.
  k.body = {assign("t", f32(0))};
  BOOST_TEST(contains(verify_error(k), "undeclared variable 't'"));
  k.body = {declare("t", F, f32(0)), assign("t", i32(0))};
  BOOST_TEST(contains(verify_error(k), "i32 value to variable 't' of type f32"));
  k.body = {loop("k", i32(0), i32(2), {assign("k", i32(0))})};
  BOOST_TEST(contains(verify_error(k), "loop variable 'k', which is read-only"));
}

BOOST_AUTO_TEST_CASE(buffer_errors) {
  Kernel k = base_kernel();
  k.body = {store(Buf{0}, global_index(), f32(0))};
  BOOST_TEST(contains(verify_error(k), "store to buffer 0 'x', which is declared read-only"));
  k.body = {store(Buf{1}, global_index(), load(Buf{1}, global_index(), F))};
  BOOST_TEST(contains(verify_error(k), "load from buffer 1 'y', which is declared write-only"));
}

BOOST_AUTO_TEST_CASE(vector_load_errors) {
  Kernel k("vec");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf n = k.add_buffer("n", I, Access::read);
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = 4;
  const Expr i = global_index();
  // The helper rejects widths other than 2 and 4, bad names and index types.
  BOOST_TEST(contains(internal_error([&] { load_vector({"a", "b", "c"}, x, i, F); }),
                      "a vector load declares 2 or 4 variables, got 3"));
  BOOST_TEST(contains(internal_error([&] { load_vector({"a", "b c"}, x, i, F); }), "'b c' is not an identifier"));
  BOOST_TEST(contains(internal_error([&] { load_vector({"a", "b"}, x, f32(0), F); }),
                      "vector load index must be i32 or u32, got f32"));
  // verify() checks the buffer's type and access and the declared names.
  k.body = {load_vector({"a", "b"}, n, i, F)};
  BOOST_TEST(contains(verify_error(k), "vector load of type f32 from buffer 1 'n' of type i32"));
  k.body = {load_vector({"a", "b"}, y, i, F)};
  BOOST_TEST(contains(verify_error(k), "vector load from buffer 2 'y', which is declared write-only"));
  k.body = {declare("b", F, f32(0)), load_vector({"a", "b"}, x, i, F)};
  BOOST_TEST(contains(verify_error(k), "variable 'b' is already declared"));
  k.body = {load_vector({"a", "a"}, x, i, F)};
  BOOST_TEST(contains(verify_error(k), "variable 'a' is already declared"));
  Stmt wide = load_vector({"a", "b"}, x, i, F);
  wide.vars.push_back("c");
  k.body = {wide};
  BOOST_TEST(contains(verify_error(k), "declares 3 variables; the width must be 2 or 4"));
  // The declared variables are in scope after the load, with the buffer's type.
  k.body = {load_vector({"a", "b"}, x, i, F), store(y, i, var("a", F) + var("b", F))};
  BOOST_CHECK_NO_THROW(verify(k));
  k.body = {branch(boolean(true), {load_vector({"a", "b"}, x, i, F)}), store(y, i, var("a", F))};
  BOOST_TEST(contains(verify_error(k), "variable 'a' is used before its declaration or outside its scope"));
}

BOOST_AUTO_TEST_CASE(vector_store_errors) {
  Kernel k("vec");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf n = k.add_buffer("n", I, Access::read_write);
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = 4;
  const Expr i = global_index();
  // The helper rejects widths other than 2 and 4, mixed types and bad indices.
  BOOST_TEST(contains(internal_error([&] { store_vector(y, i, {f32(0), f32(1), f32(2)}); }),
                      "a vector store writes 2 or 4 values, got 3"));
  BOOST_TEST(contains(internal_error([&] { store_vector(y, i, {f32(0), i32(1)}); }),
                      "the values of a vector store differ in type"));
  BOOST_TEST(contains(internal_error([&] { store_vector(y, f32(0), {f32(0), f32(1)}); }),
                      "vector store index must be i32 or u32, got f32"));
  // verify() checks the buffer's access and type.
  k.body = {store_vector(x, i, {f32(0), f32(1)})};
  BOOST_TEST(contains(verify_error(k), "vector store to buffer 0 'x', which is declared read-only"));
  k.body = {store_vector(n, i, {f32(0), f32(1)})};
  BOOST_TEST(contains(verify_error(k), "vector store of a f32 value into buffer 1 'n' of type i32"));
  Stmt wide = store_vector(y, i, {f32(0), f32(1)});
  wide.values.push_back(f32(2));
  k.body = {wide};
  BOOST_TEST(contains(verify_error(k), "writes 3 values; the width must be 2 or 4"));
  k.body = {store_vector(y, i, {var("a", F), f32(1)})};
  BOOST_TEST(contains(verify_error(k), "variable 'a' is used before its declaration"));
  k.body = {store_vector(y, i, {load(x, i, F), f32(1)}), store_vector(n, cast(U, i), {i32(1), i32(2)})};
  BOOST_CHECK_NO_THROW(verify(k));
}

BOOST_AUTO_TEST_CASE(buffer_type_and_index_errors) {
  Kernel k = base_kernel();
  k.body = {store(Buf{1}, global_index(), cast(F, load(Buf{0}, global_index(), I)))};
  BOOST_TEST(contains(verify_error(k), "load of type i32 from buffer 0 'x' of type f32"));
  k.body = {store(Buf{1}, global_index(), i32(0))};
  BOOST_TEST(contains(verify_error(k), "store of a i32 value into buffer 1 'y' of type f32"));
  k.body = {store(Buf{5}, global_index(), f32(0))};
  BOOST_TEST(contains(verify_error(k), "buffer index 5 is invalid (the kernel has 2 buffers)"));
}

BOOST_AUTO_TEST_CASE(hand_built_nodes_are_checked) {
  // Nodes built without the helpers (their fields are public) are re-checked.
  ExprNode bad{};
  bad.kind = ExprKind::binary;
  bad.type = F;
  bad.binary = BinaryOp::lt;  // comparison must be typed bool
  bad.args = {f32(1), f32(2)};
  Kernel k = base_kernel();
  k.body = {branch(boolean(true), {store(Buf{1}, global_index(), Expr(std::make_shared<const ExprNode>(bad)))})};
  BOOST_TEST(contains(verify_error(k), "binary 'lt' is typed f32, expected bool"));
  Stmt loop_stmt = loop("k", i32(0), i32(2), {});
  loop_stmt.step = -1;
  k.body = {loop_stmt};
  BOOST_TEST(contains(verify_error(k), "step must be in [1, 2^31)"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(printing)

BOOST_AUTO_TEST_CASE(prints_stable_text) {
  Kernel k("scale");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf y = k.add_buffer("y", F, Access::read_write);
  k.global_size = 100;
  k.workgroup_size = 32;
  Expr i = global_index();
  k.body = {
      declare("acc", F, f32(0.1)),
      loop("j", i32(0), i32(3), {assign("acc", max(var("acc", F) * f32(2), -load(x, i, F)))}, 2),
      branch(unary(UnaryOp::logical_not, var("acc", F) < f32(-std::numeric_limits<float>::infinity())),
             {store(y, cast(U, i), select(boolean(true), var("acc", F), erf(f32(1))))},
             {store(y, i, load(y, i, F) + f32(1e20))}),
  };
  const std::string expected =
      "kernel scale (global_size 100, workgroup_size 32)\n"
      "buffer 0 x: f32 read\n"
      "buffer 1 y: f32 read_write\n"
      "f32 acc = 0.1\n"
      "for (i32 j = 0; j < 3; j += 2) {\n"
      "  acc = max((acc * 2.0), neg(x[global_index()]))\n"
      "}\n"
      "if (not((acc < -inf))) {\n"
      "  y[u32(global_index())] = select(true, acc, erf(1.0))\n"
      "} else {\n"
      "  y[global_index()] = (y[global_index()] + 1e+20)\n"
      "}\n";
  BOOST_TEST(print(k) == expected);
  BOOST_TEST(print(k) == print(k));
}

BOOST_AUTO_TEST_CASE(prints_vector_loads) {
  Kernel k("vec");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = 2;
  k.body = {load_vector({"a", "b", "c", "d"}, x, global_index(), F), store(y, global_index(), var("d", F))};
  BOOST_TEST(contains(print(k), "\nf32 a, b, c, d = x.vec4[global_index()]\n"));
}

BOOST_AUTO_TEST_CASE(prints_vector_stores) {
  Kernel k("vec");
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = 2;
  k.body = {store_vector(y, global_index(), {f32(1), f32(2)})};
  BOOST_TEST(contains(print(k), "\ny.vec2[global_index()] = (1.0, 2.0)\n"));
}

BOOST_AUTO_TEST_CASE(print_distinguishes_what_matters) {
  auto kernel_with = [](Expr value) {
    Kernel k("k");
    Buf y = k.add_buffer("y", value.type(), Access::write);
    k.global_size = 4;
    k.body = {store(y, global_index(), value)};
    return print(k);
  };
  BOOST_TEST(kernel_with(f32(1)) != kernel_with(i32(1)));
  BOOST_TEST(kernel_with(i32(1)) != kernel_with(u32(1)));
  BOOST_TEST(kernel_with(f32(0.1)) != kernel_with(f32(0.1000001)));
  BOOST_TEST(contains(kernel_with(f32(std::nan(""))), "= nan"));
  Kernel a("k"), b("k");
  a.global_size = b.global_size = 4;
  b.workgroup_size = 128;
  BOOST_TEST(print(a) != print(b));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(dispatch)

BOOST_AUTO_TEST_CASE(grid_covers_every_index_with_a_short_tail) {
  for (std::uint32_t wg : {1u, 64u, 256u}) {
    for (std::uint32_t max_x : {1u, 7u, 65535u, 2147483647u}) {
      const std::int64_t edge = std::int64_t{wg} * max_x;
      for (std::int64_t size : {std::int64_t{1}, std::int64_t{63}, std::int64_t{64}, std::int64_t{65}, edge - 1, edge,
                                edge + 1, 3 * edge + 5, std::int64_t{2147483647}}) {
        if (size <= 0 || size >= (std::int64_t{1} << 31)) continue;
        Kernel k("k");
        k.global_size = size;
        k.workgroup_size = wg;
        const auto grid = dispatch_grid(k, max_x);
        const std::int64_t groups = (size + wg - 1) / wg;
        const std::int64_t launched = std::int64_t{grid[0]} * grid[1];
        BOOST_TEST(grid[0] >= 1u);
        BOOST_TEST(grid[0] <= max_x);
        BOOST_TEST(grid[2] == 1u);
        BOOST_TEST(launched >= groups);
        BOOST_TEST(launched - groups < std::int64_t{grid[0]});  // the tail is less than one row
        if (groups <= max_x) BOOST_TEST(grid[1] == 1u);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(grid_rejects_bad_sizes) {
  Kernel k("k");
  k.global_size = 0;
  BOOST_TEST(contains(internal_error([&] { dispatch_grid(k, 65535); }), "global_size 0"));
  k.global_size = 10;
  BOOST_TEST(contains(internal_error([&] { dispatch_grid(k, 0); }), "0 workgroups"));
  k.workgroup_size = 0;
  BOOST_TEST(contains(internal_error([&] { dispatch_grid(k, 65535); }), "workgroup_size is 0"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(interpreter)

BOOST_AUTO_TEST_CASE(unary_f32_ops_match_std_math) {
  struct Case {
    UnaryOp op;
    float (*reference)(float);
  };
  const Case cases[] = {
      {UnaryOp::neg, [](float x) { return -x; }},
      {UnaryOp::exp, [](float x) { return std::exp(x); }},
      {UnaryOp::log, [](float x) { return std::log(x); }},
      {UnaryOp::sqrt, [](float x) { return std::sqrt(x); }},
      {UnaryOp::rsqrt, [](float x) { return 1.0f / std::sqrt(x); }},
      {UnaryOp::tanh, [](float x) { return std::tanh(x); }},
      {UnaryOp::erf, [](float x) { return std::erf(x); }},
      {UnaryOp::abs, [](float x) { return std::fabs(x); }},
      {UnaryOp::floor, [](float x) { return std::floor(x); }},
      {UnaryOp::ceil, [](float x) { return std::ceil(x); }},
  };
  for (const Case& c : cases) {
    const auto out = map_kernel<float, float>(F, F, kFloats, [&](Expr x) { return unary(c.op, x); });
    for (std::size_t i = 0; i < kFloats.size(); ++i)
      BOOST_TEST(same_float(out[i], c.reference(kFloats[i])), unary_op_name(c.op)
                                                                  << "(" << kFloats[i] << ") = " << out[i]);
  }
}

BOOST_AUTO_TEST_CASE(results_are_computed_in_float) {
  // 16777216 + 1 is 16777216 in f32 (but not in double).
  const auto out = map_kernel<float, float>(F, F, {16777216.0f}, [](Expr x) { return (x + f32(1)) - x; });
  BOOST_TEST(out[0] == 0.0f);
}

BOOST_AUTO_TEST_CASE(binary_f32_ops) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = {1.5f, -2.0f, 3.0f, nan, 2.0f, 0.0f};
  const std::vector<float> b = {0.5f, 4.0f, -3.0f, 1.0f, 10.0f, 0.0f};
  auto check = [&](const std::function<Expr(Expr, Expr)>& f, const std::function<float(float, float)>& ref,
                   const char* what) {
    const auto out = zip_kernel<float, float>(F, F, a, b, f);
    for (std::size_t i = 0; i < a.size(); ++i) BOOST_TEST(same_float(out[i], ref(a[i], b[i])), what << " at " << i);
  };
  check([](Expr x, Expr y) { return x + y; }, [](float x, float y) { return x + y; }, "add");
  check([](Expr x, Expr y) { return x - y; }, [](float x, float y) { return x - y; }, "sub");
  check([](Expr x, Expr y) { return x * y; }, [](float x, float y) { return x * y; }, "mul");
  check([](Expr x, Expr y) { return x / y; }, [](float x, float y) { return x / y; }, "div");
  check([](Expr x, Expr y) { return pow(x, y); }, [](float x, float y) { return std::pow(x, y); }, "pow");
  // min/max ignore a NaN operand (fminf/fmaxf).
  check([](Expr x, Expr y) { return min(x, y); }, [](float x, float y) { return std::fmin(x, y); }, "min");
  check([](Expr x, Expr y) { return max(x, y); }, [](float x, float y) { return std::fmax(x, y); }, "max");
  const auto mx = zip_kernel<float, float>(F, F, {nan}, {3.0f}, [](Expr x, Expr y) { return max(x, y); });
  BOOST_TEST(mx[0] == 3.0f);

  // Comparisons are IEEE: NaN compares false except !=. Stored as u32 0/1.
  auto compare = [&](const std::function<Expr(Expr, Expr)>& f, const std::function<bool(float, float)>& ref,
                     const char* what) {
    const auto out = zip_kernel<float, std::uint32_t>(F, U, a, b, [&](Expr x, Expr y) { return cast(U, f(x, y)); });
    for (std::size_t i = 0; i < a.size(); ++i) BOOST_TEST(out[i] == (ref(a[i], b[i]) ? 1u : 0u), what << " at " << i);
  };
  compare([](Expr x, Expr y) { return x < y; }, [](float x, float y) { return x < y; }, "lt");
  compare([](Expr x, Expr y) { return x <= y; }, [](float x, float y) { return x <= y; }, "le");
  compare([](Expr x, Expr y) { return x > y; }, [](float x, float y) { return x > y; }, "gt");
  compare([](Expr x, Expr y) { return x >= y; }, [](float x, float y) { return x >= y; }, "ge");
  compare([](Expr x, Expr y) { return eq(x, y); }, [](float x, float y) { return x == y; }, "eq");
  compare([](Expr x, Expr y) { return ne(x, y); }, [](float x, float y) { return x != y; }, "ne");
}

BOOST_AUTO_TEST_CASE(integer_ops_wrap_and_truncate) {
  constexpr std::int32_t kMax = std::numeric_limits<std::int32_t>::max();
  constexpr std::int32_t kMin = std::numeric_limits<std::int32_t>::min();
  const std::vector<std::int32_t> a = {7, -7, kMax, kMin, 5, kMin};
  const std::vector<std::int32_t> b = {2, 2, 1, 1, 3, -1};
  auto i32_op = [&](const std::function<Expr(Expr, Expr)>& f) {
    return zip_kernel<std::int32_t, std::int32_t>(I, I, a, b, f);
  };
  BOOST_TEST(i32_op([](Expr x, Expr y) { return x / y; }) == (std::vector<std::int32_t>{3, -3, kMax, kMin, 1, kMin}));
  BOOST_TEST(i32_op([](Expr x, Expr y) { return x + y; }) ==
             (std::vector<std::int32_t>{9, -5, kMin, kMin + 1, 8, kMax}));
  BOOST_TEST(i32_op([](Expr x, Expr y) { return x - y; }) ==
             (std::vector<std::int32_t>{5, -9, kMax - 1, kMax, 2, kMin + 1}));
  BOOST_TEST(i32_op([](Expr x, Expr y) { return x * y; }) ==
             (std::vector<std::int32_t>{14, -14, kMax, kMin, 15, kMin}));
  BOOST_TEST(i32_op([](Expr x, Expr y) { return min(x, y); }) == (std::vector<std::int32_t>{2, -7, 1, kMin, 3, kMin}));
  BOOST_TEST(i32_op([](Expr x, Expr y) { return max(x, y); }) == (std::vector<std::int32_t>{7, 2, kMax, 1, 5, -1}));
  BOOST_TEST(i32_op([](Expr x, Expr) { return abs(x); }) == (std::vector<std::int32_t>{7, 7, kMax, kMin, 5, kMin}));
  BOOST_TEST(i32_op([](Expr x, Expr) { return -x; }) == (std::vector<std::int32_t>{-7, 7, -kMax, kMin, -5, kMin}));
  const auto mod =
      zip_kernel<std::int32_t, std::int32_t>(I, I, {7, 0, kMax}, {3, 5, 10}, [](Expr x, Expr y) { return x % y; });
  BOOST_TEST(mod == (std::vector<std::int32_t>{1, 0, 7}));

  const std::vector<std::uint32_t> ua = {7, 0, 0xFFFFFFFFu}, ub = {2, 1, 2};
  auto u32_op = [&](const std::function<Expr(Expr, Expr)>& f) {
    return zip_kernel<std::uint32_t, std::uint32_t>(U, U, ua, ub, f);
  };
  BOOST_TEST(u32_op([](Expr x, Expr y) { return x - y; }) == (std::vector<std::uint32_t>{5, 0xFFFFFFFFu, 0xFFFFFFFDu}));
  BOOST_TEST(u32_op([](Expr x, Expr y) { return x + y; }) == (std::vector<std::uint32_t>{9, 1, 1}));
  BOOST_TEST(u32_op([](Expr x, Expr y) { return x / y; }) == (std::vector<std::uint32_t>{3, 0, 0x7FFFFFFFu}));
  BOOST_TEST(u32_op([](Expr x, Expr y) { return x % y; }) == (std::vector<std::uint32_t>{1, 0, 1}));
  BOOST_TEST(u32_op([](Expr x, Expr y) { return max(x, y); }) == (std::vector<std::uint32_t>{7, 1, 0xFFFFFFFFu}));
  BOOST_TEST(u32_op([](Expr x, Expr y) { return cast(U, x > y); }) == (std::vector<std::uint32_t>{1, 0, 1}));
}

BOOST_AUTO_TEST_CASE(logical_ops_and_bool_equality) {
  const std::vector<std::uint32_t> a = {0, 0, 1, 1}, b = {0, 1, 0, 1};
  auto op = [&](const std::function<Expr(Expr, Expr)>& f) {
    return zip_kernel<std::uint32_t, std::uint32_t>(
        U, U, a, b, [&](Expr x, Expr y) { return cast(U, f(ne(x, u32(0)), ne(y, u32(0)))); });
  };
  BOOST_TEST(op([](Expr x, Expr y) { return x && y; }) == (std::vector<std::uint32_t>{0, 0, 0, 1}));
  BOOST_TEST(op([](Expr x, Expr y) { return x || y; }) == (std::vector<std::uint32_t>{0, 1, 1, 1}));
  BOOST_TEST(op([](Expr x, Expr y) { return eq(x, y); }) == (std::vector<std::uint32_t>{1, 0, 0, 1}));
  BOOST_TEST(op([](Expr x, Expr y) { return ne(x, y); }) == (std::vector<std::uint32_t>{0, 1, 1, 0}));
  BOOST_TEST(op([](Expr x, Expr) { return unary(UnaryOp::logical_not, x); }) ==
             (std::vector<std::uint32_t>{1, 1, 0, 0}));
}

BOOST_AUTO_TEST_CASE(casts_follow_c) {
  const std::vector<float> x = {2.7f, -2.7f, 0.0f, -0.5f, 1e9f};
  BOOST_TEST((map_kernel<float, std::int32_t>(F, I, x, [](Expr e) { return cast(I, e); })) ==
             (std::vector<std::int32_t>{2, -2, 0, 0, 1000000000}));
  BOOST_TEST((map_kernel<float, std::uint32_t>(F, U, x, [](Expr e) { return cast(U, abs(e)); })) ==
             (std::vector<std::uint32_t>{2, 2, 0, 0, 1000000000}));
  BOOST_TEST((map_kernel<float, std::uint32_t>(F, U, x, [](Expr e) { return cast(U, cast(B, e)); })) ==
             (std::vector<std::uint32_t>{1, 1, 0, 1, 1}));
  BOOST_TEST((map_kernel<std::int32_t, std::uint32_t>(I, U, {-1, 5}, [](Expr e) { return cast(U, e); })) ==
             (std::vector<std::uint32_t>{0xFFFFFFFFu, 5}));
  BOOST_TEST((map_kernel<std::uint32_t, std::int32_t>(U, I, {0xFFFFFFFEu}, [](Expr e) { return cast(I, e); })) ==
             (std::vector<std::int32_t>{-2}));
  BOOST_TEST((map_kernel<std::uint32_t, float>(U, F, {0xFFFFFFFFu, 3}, [](Expr e) { return cast(F, e); })) ==
             (std::vector<float>{4294967296.0f, 3.0f}));
  BOOST_TEST((map_kernel<std::int32_t, float>(I, F, {-3, 0}, [](Expr e) {
               return cast(F, ne(e, i32(0))) + cast(F, e);
             })) == (std::vector<float>{-2.0f, 0.0f}));

  // Casts whose result is undefined on GPUs are errors.
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), 3e9f, -3e9f}) {
    const std::string m =
        internal_error([&] { map_kernel<float, std::int32_t>(F, I, {bad}, [](Expr e) { return cast(I, e); }); });
    BOOST_TEST(contains(m, "to i32 is out of range"));
    BOOST_TEST(contains(m, "kernel 'map', invocation 0"));
  }
  BOOST_TEST(contains(
      internal_error([] { map_kernel<float, std::uint32_t>(F, U, {-1.0f}, [](Expr e) { return cast(U, e); }); }),
      "to u32 is out of range"));
}

BOOST_AUTO_TEST_CASE(select_evaluates_only_the_chosen_operand) {
  // Zero padding: a select guards a load that would be out of bounds.
  Kernel k("pad");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = 6;
  Expr src = global_index() - i32(1);
  Expr inside = src >= i32(0) && src < i32(4);
  k.body = {store(y, global_index(), select(inside, load(x, src, F), f32(-1)))};
  std::vector<float> in = {1, 2, 3, 4}, out(6);
  run(k, {bytes(in), bytes(out)});
  BOOST_TEST(out == (std::vector<float>{-1, 1, 2, 3, 4, -1}));
}

BOOST_AUTO_TEST_CASE(nested_loops_and_branches) {
  // C[i, j] = sum_k A[i, k] * B[k, j] for 5x3 by 3x4, with a ReLU branch.
  constexpr int M = 5, K = 3, N = 4;
  Kernel k("matmul_relu");
  Buf a = k.add_buffer("a", F, Access::read);
  Buf b = k.add_buffer("b", F, Access::read);
  Buf c = k.add_buffer("c", F, Access::write);
  k.global_size = M * N;
  Expr i = global_index() / i32(N), j = global_index() % i32(N), kk = var("k", I);
  k.body = {
      declare("acc", F, f32(0)),
      loop("k", i32(0), i32(K),
           {assign("acc", var("acc", F) + load(a, i * i32(K) + kk, F) * load(b, kk * i32(N) + j, F))}),
      branch(var("acc", F) < f32(0), {store(c, global_index(), f32(0))}, {store(c, global_index(), var("acc", F))}),
  };
  std::vector<float> av(M * K), bv(K * N), cv(M * N);
  for (int t = 0; t < M * K; ++t) av[t] = static_cast<float>(t % 7) - 3.0f;
  for (int t = 0; t < K * N; ++t) bv[t] = 0.5f * static_cast<float>(t % 5) - 1.0f;
  run(k, {bytes(av), bytes(bv), bytes(cv)});
  for (int r = 0; r < M; ++r) {
    for (int col = 0; col < N; ++col) {
      float acc = 0;
      for (int t = 0; t < K; ++t) acc += av[r * K + t] * bv[t * N + col];
      BOOST_TEST(cv[r * N + col] == std::max(acc, 0.0f), "c[" << r << ", " << col << "]");
    }
  }
}

BOOST_AUTO_TEST_CASE(loops_step_and_reevaluate_their_bound) {
  Kernel k("count");
  Buf y = k.add_buffer("y", I, Access::write);
  k.global_size = 1;
  // for (k = 1; k < limit; k += 3) limit = limit - 1   (limit starts at 20)
  // iterations: k = 1 (limit 19), 4 (18), 7 (17), 10 (16), 13 (15) -> stops at 16 >= 15
  k.body = {
      declare("limit", I, i32(20)),
      declare("n", I, i32(0)),
      loop("k", i32(1), var("limit", I), {assign("limit", var("limit", I) - i32(1)), assign("n", var("n", I) + i32(1))},
           3),
      loop("k", i32(5), i32(5), {assign("n", i32(-100))}),  // runs zero times
      store(y, i32(0), var("n", I) * i32(100) + var("limit", I)),
  };
  std::vector<std::int32_t> out(1);
  run(k, {bytes(out)});
  BOOST_TEST(out[0] == 515);
}

BOOST_AUTO_TEST_CASE(out_of_bounds_accesses_are_errors) {
  Kernel k("shift");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = 4;
  k.body = {store(y, global_index(), load(x, global_index() + i32(1), F))};
  std::vector<float> in(4), out(4);
  std::string m = internal_error([&] { run(k, {bytes(in), bytes(out)}); });
  BOOST_TEST(contains(m, "kernel 'shift', invocation 3"));
  BOOST_TEST(contains(m, "load from buffer 0 'x' at index 4 is out of bounds (size 4 elements)"));

  k.body = {store(y, global_index() - i32(1), f32(0))};
  m = internal_error([&] { run(k, {bytes(in), bytes(out)}); });
  BOOST_TEST(contains(m, "invocation 0: store to buffer 1 'y' at index -1 is out of bounds"));

  k.body = {store(y, cast(U, global_index()) + u32(0xFFFFFFF0u), f32(0))};
  BOOST_TEST(contains(internal_error([&] {
                        run(k, {bytes(in), bytes(out)});
                      }),
                      "at index 4294967280 is out of bounds"));
}

BOOST_AUTO_TEST_CASE(vector_loads_read_aligned_consecutive_elements) {
  // Invocation i reads vector i of x (elements 4i .. 4i+3) and of n (2i, 2i+1).
  Kernel k("gather");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf n = k.add_buffer("n", I, Access::read_write);
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = 3;
  const Expr i = global_index();
  k.body = {load_vector({"a", "b", "c", "d"}, x, i, F), load_vector({"p", "q"}, n, cast(U, i), I),
            store(y, i,
                  var("a", F) + var("b", F) * f32(10) + var("c", F) * f32(100) + var("d", F) * f32(1000) +
                      cast(F, var("p", I) - var("q", I)))};
  std::vector<float> in(12), out(3);
  for (int e = 0; e < 12; ++e) in[e] = static_cast<float>(e % 4 + e / 4);
  std::vector<std::int32_t> ints = {7, 2, 30, 10, 500, 100};
  run(k, {bytes(in), bytes(ints), bytes(out)});
  BOOST_TEST(out[0] == 0 + 10 + 200 + 3000 + 5);
  BOOST_TEST(out[1] == 1 + 20 + 300 + 4000 + 20);
  BOOST_TEST(out[2] == 2 + 30 + 400 + 5000 + 400);

  // The whole vector must be in the buffer: 11 elements hold 2 whole vec4s.
  std::vector<float> short_in(11);
  const std::string m = internal_error([&] { run(k, {bytes(short_in), bytes(ints), bytes(out)}); });
  BOOST_TEST(contains(m, "kernel 'gather', invocation 2: vector load of width 4 from buffer 0 'x' at vector index 2 "
                         "(elements 8..11) is out of bounds (size 11 elements)"));
  k.body = {load_vector({"a", "b"}, x, i - i32(1), F), store(y, i, var("a", F))};
  BOOST_TEST(contains(internal_error([&] { run(k, {bytes(in), bytes(ints), bytes(out)}); }),
                      "invocation 0: vector load of width 2 from buffer 0 'x' at vector index -1"));
}

BOOST_AUTO_TEST_CASE(i64_and_bool_buffers_hold_elements_as_c_does) {
  // y[i] = x[i] * 2^33 / 2^32 + (flag[i] ? 1 : 0): products past 2^32;
  // positive[i] = x[i] > 0 as one byte.
  constexpr ScalarType L = ScalarType::i64;
  Kernel k("wide");
  Buf x = k.add_buffer("x", L, Access::read);
  Buf flag = k.add_buffer("flag", B, Access::read);
  Buf y = k.add_buffer("y", L, Access::write);
  Buf positive = k.add_buffer("positive", B, Access::write);
  k.global_size = 4;
  const Expr i = global_index();
  const Expr v = load(x, i, L);
  k.body = {store(y, i, v * i64(std::int64_t{1} << 33) / i64(std::int64_t{1} << 32) +
                            select(load(flag, i, B), i64(1), i64(0))),
            store(positive, i, v > i64(0))};
  std::vector<std::int64_t> in = {3, -5, std::int64_t{1} << 20, 0}, out(4);
  std::vector<std::uint8_t> flags = {1, 0, 0, 1}, positives(4, 9);
  run(k, {bytes(in), bytes(flags), bytes(out), bytes(positives)});
  BOOST_TEST(out == (std::vector<std::int64_t>{7, -10, std::int64_t{1} << 21, 1}), boost::test_tools::per_element());
  BOOST_TEST(positives == (std::vector<std::uint8_t>{1, 0, 1, 0}), boost::test_tools::per_element());
  // Casts: i64 -> i32 keeps the low bits; f32 -> i64 truncates.
  const auto low = map_kernel<std::int64_t, std::int32_t>(L, I, {(std::int64_t{1} << 32) + 5, -1},
                                                         [](Expr e) { return cast(I, e); });
  BOOST_TEST(low == (std::vector<std::int32_t>{5, -1}), boost::test_tools::per_element());
  const auto truncated = map_kernel<float, std::int64_t>(F, L, {-2.5f, 0x1p40f}, [](Expr e) { return cast(L, e); });
  BOOST_TEST(truncated == (std::vector<std::int64_t>{-2, std::int64_t{1} << 40}), boost::test_tools::per_element());
  // No vector access of i64 or bool buffers.
  k.body = {load_vector({"a", "b"}, x, i, L), store(y, i, var("a", L))};
  BOOST_TEST(contains(internal_error([&] { verify(k); }), "vectors are f32, i32 or u32"));
}

// f16 and bf16 are storage types: two bytes per element, loaded as the f32
// they widen to and stored rounded to nearest even (kiln/float16.h).
BOOST_AUTO_TEST_CASE(sixteen_bit_buffers_widen_on_load_and_round_on_store) {
  constexpr ScalarType H = ScalarType::f16, BF = ScalarType::bf16;
  BOOST_TEST(element_bytes(H) == 2u);
  BOOST_TEST(element_bytes(BF) == 2u);
  BOOST_TEST((value_type(H) == F && value_type(BF) == F && value_type(I) == I));
  Kernel k("halves");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf h = k.add_buffer("h", H, Access::read_write);
  Buf b = k.add_buffer("b", BF, Access::write);
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = 6;
  const Expr i = global_index();
  k.body = {store(y, i, load(h, i, F) * f32(2.0)), store(h, i, load(x, i, F)), store(b, i, load(x, i, F))};
  // 1 + 2^-11 is halfway between two halves (to even: 1); 1 + 3 * 2^-11 rounds
  // up; 65520 overflows to infinity; 2^-25 is half the smallest subnormal (to 0).
  std::vector<float> in = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f, 0x1p-25f, -0x1.8p-24f, 1.00390625f};
  std::vector<std::uint16_t> halves = {0x3c00, 0xc000, 0x7c00, 0x0001, 0x8000, 0x7bff}, brains(6);
  std::vector<float> doubled(6);
  run(k, {bytes(in), bytes(halves), bytes(brains), bytes(doubled)});
  BOOST_TEST(doubled == (std::vector<float>{2.0f, -4.0f, INFINITY, 0x1p-23f, -0.0f, 131008.0f}),
             boost::test_tools::per_element());
  BOOST_TEST(halves == (std::vector<std::uint16_t>{0x3c00, 0x3c02, 0x7c00, 0x0000, 0x8002, 0x3c04}),
             boost::test_tools::per_element());
  for (std::size_t j = 0; j < in.size(); ++j) BOOST_TEST(brains[j] == kiln::bf16_bits(in[j]));
  BOOST_TEST(brains[5] == 0x3f80u);  // 1 + 2^-8: a tie between bf16 values, to even
  // No 16-bit value exists outside a buffer: variables, expressions and
  // shared arrays are f32.
  BOOST_TEST(contains(internal_error([&] { declare("v", H, load(h, i, F)); }), "a storage type"));
  BOOST_TEST(contains(internal_error([&] { load(h, i, H); }), "a storage type"));
  Stmt half_var = declare("v", F, load(h, i, F));
  half_var.type = H;  // as a bug in lowering would build it
  k.body = {half_var};
  BOOST_TEST(contains(internal_error([&] { verify(k); }), "declared f16, a storage type"));
  BOOST_TEST(contains(internal_error([&] { k.add_shared("s", BF, 4); }), "element type bf16"));
  BOOST_TEST(contains(print(k), "bf16"));
}

// f16 arithmetic: f16 values come from casts of f32 values (rounded to
// nearest even), and each op on them rounds its result to f16, so a chain
// of ops rounds at every step where f32 arithmetic rounds once.
BOOST_AUTO_TEST_CASE(f16_arithmetic_rounds_every_result) {
  constexpr ScalarType H = ScalarType::f16;
  Kernel k("half_math");
  Buf a = k.add_buffer("a", H, Access::read);
  Buf b = k.add_buffer("b", H, Access::read);
  Buf y = k.add_buffer("y", F, Access::write);
  Buf c = k.add_buffer("c", B, Access::write);
  k.global_size = 4;
  const Expr i = global_index();
  const Expr ha = cast(H, load(a, i, F)), hb = cast(H, load(b, i, F));
  const int ops = 9;
  auto at = [&](int op) { return i * i32(ops) + i32(op); };
  k.body = {store(y, at(0), cast(F, ha + hb)),
            store(y, at(1), cast(F, ha * hb - ha)),
            store(y, at(2), cast(F, ha - hb)),
            store(y, at(3), cast(F, ha / hb)),
            store(y, at(4), cast(F, max(ha, hb))),
            store(y, at(5), cast(F, -abs(ha))),
            store(y, at(6), cast(F, exp(ha))),
            store(y, at(7), cast(F, select(ha < hb, ha, hb))),
            store(y, at(8), load(a, i, F) * load(b, i, F) - load(a, i, F)),
            store(c, i, ha <= hb)};
  verify(k);
  // 1 + 2^-10 is f16's next value after 1; 2048 + 1 is a tie (to even: 2048);
  // 300 * 300 overflows f16 (65504); 2^-14 * 2^-10 is the smallest subnormal.
  std::vector<std::uint16_t> av = {kiln::f16_bits(1.0f + 0x1p-10f), kiln::f16_bits(2048.0f), kiln::f16_bits(300.0f),
                                   kiln::f16_bits(0x1p-14f)};
  std::vector<std::uint16_t> bv = {kiln::f16_bits(1.0f + 0x1p-10f), kiln::f16_bits(1.0f), kiln::f16_bits(300.0f),
                                   kiln::f16_bits(0x1p-10f)};
  std::vector<float> out(4 * ops);
  std::vector<std::uint8_t> less_equal(4);
  run(k, {bytes(av), bytes(bv), bytes(out), bytes(less_equal)});
  auto half = [](float v) { return kiln::f16_value(kiln::f16_bits(v)); };
  const float e = 1.0f + 0x1p-10f;
  BOOST_TEST(out[0] == 2.0f + 0x1p-9f);
  // (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20 rounds to 1 + 2^-9 in f16 before the
  // subtraction, which leaves 2^-10; in f32 it leaves 2^-10 + 2^-20.
  BOOST_TEST(out[1] == 0x1p-10f);
  BOOST_TEST(half(e * e - e) == 0x1p-10f + 0x1p-20f);
  BOOST_TEST(out[8] == e * e - e);  // f32 arithmetic: rounded only when stored
  BOOST_TEST(out[ops + 0] == 2048.0f);  // 2049 is a tie: to even
  BOOST_TEST(out[ops + 2] == 2047.0f);
  BOOST_TEST(out[ops + 4] == 2048.0f);
  BOOST_TEST(out[ops + 5] == -2048.0f);
  BOOST_TEST(std::isinf(out[ops + 6]));  // e^2048 overflows
  BOOST_TEST(std::isinf(out[2 * ops + 1]));  // 300 * 300 overflows f16, though the stored f32 would not
  BOOST_TEST(out[2 * ops + 8] == 89700.0f);
  BOOST_TEST(out[2 * ops + 3] == 1.0f);
  BOOST_TEST(out[3 * ops + 1] == 0x1p-24f - 0x1p-14f);  // subnormal: exact
  BOOST_TEST(out[3 * ops + 3] == 0x1p-4f);
  BOOST_TEST(out[6] == half(std::exp(e)));
  BOOST_TEST(out[ops + 7] == 1.0f);
  BOOST_TEST(less_equal == (std::vector<std::uint8_t>{1, 0, 1, 1}), boost::test_tools::per_element());
  // f16 meets f32 only through casts; no variable, load, shared array or
  // integer is f16, and bf16 has no values at all.
  BOOST_TEST(contains(internal_error([&] { cast(H, i32(1)); }), "f16 values convert to and from f32 only"));
  BOOST_TEST(contains(internal_error([&] { cast(ScalarType::bf16, f32(1.0)); }), "bf16 is a storage type"));
  BOOST_TEST(contains(internal_error([&] { declare("v", H, ha); }), "a storage type"));
  BOOST_TEST(contains(internal_error([&] { pow(ha, hb); }), "does not accept operands of type f16"));
  BOOST_TEST(contains(internal_error([&] { ha + load(a, i, F); }), "operands of one type"));
  Kernel stored("stores_a_half");
  Buf h = stored.add_buffer("h", H, Access::read_write);
  stored.global_size = 1;
  stored.body = {store(h, i, cast(H, load(h, i, F)))};
  BOOST_TEST(contains(internal_error([&] { verify(stored); }), "store of a f16 value"));
  BOOST_TEST(contains(print(k), "f16("));
}

// use_f16_arithmetic computes what a kernel stores into f16 buffers in f16:
// pointwise ops on f16 elements narrow, a sum that meets a variable (an
// accumulation) stays f32 and is rounded once, and f32 buffers are untouched.
BOOST_AUTO_TEST_CASE(f16_arithmetic_narrows_stored_pointwise_math_only) {
  constexpr ScalarType H = ScalarType::f16;
  Kernel k("epilogue");
  Buf x = k.add_buffer("x", H, Access::read);
  Buf bias = k.add_buffer("bias", H, Access::read);
  Buf sum = k.add_buffer("sum", H, Access::write);
  Buf act = k.add_buffer("act", H, Access::write);
  Buf wide = k.add_buffer("wide", F, Access::write);
  Buf quad = k.add_buffer("quad", H, Access::write);
  k.global_size = 2;
  const Expr i = global_index();
  const Expr acc = var("acc", F);
  const Expr xi = load(x, i * i32(4), F), bi = load(bias, i, F);
  k.body = {declare("acc", F, f32(0.0)),
            loop("j", i32(0), i32(4), {assign("acc", acc + load(x, i * i32(4) + var("j", I), F))}),
            store(sum, i, acc + bi),
            store(act, i, tanh(acc + bi) * xi + f32(0.5)),
            store(wide, i, xi * xi + bi),
            load_vector({"v0", "v1", "v2", "v3"}, x, i, F)};
  std::vector<Expr> squares;
  for (const char* v : {"v0", "v1", "v2", "v3"}) squares.push_back(var(v, F) * var(v, F) - bi);
  k.body.push_back(store_vector(quad, i, squares));
  const Kernel before = k;
  BOOST_TEST(!uses_f16_arithmetic(before));
  BOOST_TEST(use_f16_arithmetic(k) == 5);  // act and the four quad values
  BOOST_TEST(uses_f16_arithmetic(k));
  verify(k);
  BOOST_TEST(use_f16_arithmetic(k) == 0);  // nothing left to narrow
  const std::string printed = print(k);
  BOOST_TEST(contains(printed, "f16((acc + "), printed);  // the accumulation's sum in f32, rounded once
  std::vector<float> in(8);
  for (std::size_t j = 0; j < in.size(); ++j) in[j] = 1.0f + 0x1p-10f * static_cast<float>(3 * j + 1);
  std::vector<std::uint16_t> xs(8), bs = {kiln::f16_bits(0.3f), kiln::f16_bits(-1.7f)};
  for (std::size_t j = 0; j < in.size(); ++j) xs[j] = kiln::f16_bits(in[j]);
  auto half = [](float v) { return kiln::f16_value(kiln::f16_bits(v)); };
  auto outputs = [&](const Kernel& kernel) {
    std::vector<std::uint16_t> xv = xs, bv = bs, s(2), a(2), q(8);
    std::vector<float> w(2);
    run(kernel, {bytes(xv), bytes(bv), bytes(s), bytes(a), bytes(w), bytes(q)});
    return std::make_tuple(s, a, w, q);
  };
  const auto [s32, a32, w32, q32] = outputs(before);
  const auto [s16, a16, w16, q16] = outputs(k);
  BOOST_TEST(s16 == s32, boost::test_tools::per_element());  // a lone sum with the accumulation: unchanged
  BOOST_TEST(w16 == w32, boost::test_tools::per_element());  // an f32 buffer: unchanged
  for (std::size_t e = 0; e < 2; ++e) {
    float total = 0;
    for (std::size_t j = 0; j < 4; ++j) total += kiln::f16_value(xs[4 * e + j]);
    const float b = kiln::f16_value(bs[e]), x0 = kiln::f16_value(xs[4 * e]);
    const float want = half(half(half(std::tanh(half(total + b))) * x0) + 0.5f);
    BOOST_TEST(kiln::f16_value(a16[e]) == want);
    for (std::size_t c = 0; c < 4; ++c) {
      const float v = kiln::f16_value(xs[4 * e + c]);
      BOOST_TEST(kiln::f16_value(q16[4 * e + c]) == half(half(v * v) - b));
    }
  }
}

BOOST_AUTO_TEST_CASE(vector_stores_write_aligned_consecutive_elements) {
  // Invocation i writes vector i of y (elements 4i .. 4i+3) and of n (2i, 2i+1).
  Kernel k("scatter");
  Buf y = k.add_buffer("y", F, Access::write);
  Buf n = k.add_buffer("n", I, Access::read_write);
  k.global_size = 3;
  const Expr i = global_index();
  const Expr f = cast(F, i);
  k.body = {store_vector(y, i, {f, f + f32(0.25f), f + f32(0.5f), f + f32(0.75f)}),
            store_vector(n, cast(U, i), {i * i32(10), i * i32(10) + i32(1)})};
  std::vector<float> out(12, -1.0f);
  std::vector<std::int32_t> ints(6, -1);
  run(k, {bytes(out), bytes(ints)});
  for (int e = 0; e < 12; ++e) BOOST_TEST(out[e] == static_cast<float>(e) / 4.0f);
  BOOST_TEST(ints == (std::vector<std::int32_t>{0, 1, 10, 11, 20, 21}), boost::test_tools::per_element());

  // The whole vector must be in the buffer.
  std::vector<float> short_out(11);
  BOOST_TEST(contains(internal_error([&] { run(k, {bytes(short_out), bytes(ints)}); }),
                      "invocation 2: vector store of width 4 to buffer 0 'y' at vector index 2 (elements 8..11) is "
                      "out of bounds (size 11 elements)"));
}

BOOST_AUTO_TEST_CASE(buffer_arguments_are_checked) {
  Kernel k("copy");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = 2;
  k.body = {store(y, global_index(), load(x, global_index(), F))};
  std::vector<float> in(2), out(2);
  BOOST_TEST(contains(internal_error([&] { run(k, {bytes(in)}); }), "kernel 'copy' has 2 buffers, interpret() got 1"));
  std::vector<std::byte> odd(7);
  BOOST_TEST(contains(internal_error([&] {
                        run(k, {bytes(in), std::span<std::byte>(odd)});
                      }),
                      "buffer 1 'y' has 7 bytes, not a whole number of f32 elements"));
  Kernel unverified("bad name");
  BOOST_TEST(contains(internal_error([&] { run(unverified, {}); }), "not an identifier"));
}

BOOST_AUTO_TEST_CASE(undefined_integer_results_are_errors) {
  BOOST_TEST(contains(internal_error([] {
                        zip_kernel<std::int32_t, std::int32_t>(I, I, {5}, {0}, [](Expr x, Expr y) { return x / y; });
                      }),
                      "i32 division 5 / 0"));
  BOOST_TEST(contains(internal_error([] {
                        zip_kernel<std::int32_t, std::int32_t>(I, I, {-5}, {3}, [](Expr x, Expr y) { return x % y; });
                      }),
                      "needs a >= 0 and b > 0"));
  BOOST_TEST(contains(internal_error([] {
                        zip_kernel<std::uint32_t, std::uint32_t>(U, U, {5}, {0}, [](Expr x, Expr y) { return x % y; });
                      }),
                      "u32 mod 5 % 0"));
}

BOOST_AUTO_TEST_CASE(a_million_inner_iterations_give_the_right_sum) {
  // 1000 invocations x 1000 iterations of a multiply-add with two loads.
  constexpr int N = 1000;
  Kernel k("dot_rows");
  Buf a = k.add_buffer("a", F, Access::read);
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = N;
  Expr j = var("j", I);
  k.body = {
      declare("acc", F, f32(0)),
      loop("j", i32(0), i32(N),
           {assign("acc", var("acc", F) + load(a, j, F) * load(a, (global_index() + j) % i32(N), F))}),
      store(y, global_index(), var("acc", F)),
  };
  std::vector<float> av(N), out(N);
  for (int t = 0; t < N; ++t) av[t] = static_cast<float>(t % 3);
  // Not timed (a sanitizer build or a loaded machine is slower); the suite's
  // timeout catches an interpreter that became pathologically slow.
  run(k, {bytes(av), bytes(out)});
  float expected = 0;
  for (int t = 0; t < N; ++t) expected += av[t] * av[(7 + t) % N];
  BOOST_TEST(out[7] == expected);
}

BOOST_AUTO_TEST_SUITE_END()

// ---- Workgroup shared memory and barriers ----------------------------------

namespace {

// y[g] = sum of x over workgroup g: each invocation stores its element to
// shared memory, then a tree reduction halves the active invocations per
// round (uniform loop, barrier each round).
Kernel workgroup_sum_kernel(std::int64_t groups, std::uint32_t wg, std::int64_t rounds) {
  Kernel k("group_sum");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf y = k.add_buffer("y", F, Access::write);
  Shared s = k.add_shared("partial", F, wg);
  k.global_size = groups * wg;
  k.workgroup_size = wg;
  const Expr lid = local_index();
  const Expr half = var("half", I);
  k.body.push_back(store(s, lid, load(x, global_index(), F)));
  k.body.push_back(barrier());
  k.body.push_back(declare("half", I, i32(wg / 2)));
  k.body.push_back(loop("round", i32(0), i32(rounds),
                        {branch(lid < half, {store(s, lid, load(s, lid, F) + load(s, lid + half, F))}), barrier(),
                         assign("half", half / i32(2))}));
  k.body.push_back(branch(eq(lid, i32(0)), {store(y, workgroup_index(), load(s, i32(0), F))}));
  return k;
}

}  // namespace

BOOST_AUTO_TEST_CASE(workgroup_reduction_through_shared_memory) {
  const std::int64_t groups = 5;
  const std::uint32_t wg = 64;
  const Kernel k = workgroup_sum_kernel(groups, wg, 6);
  std::vector<float> x(groups * wg);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97);  // exact sums
  std::vector<float> y(groups, -1.0f);
  run(k, {bytes(x), bytes(y)});
  for (std::int64_t g = 0; g < groups; ++g) {
    float want = 0;
    for (std::uint32_t i = 0; i < wg; ++i) want += x[static_cast<std::size_t>(g * wg + i)];
    BOOST_TEST(y[static_cast<std::size_t>(g)] == want);
  }
}

BOOST_AUTO_TEST_CASE(tile_transpose_through_shared_memory) {
  // out = in^T for a 16 x 24 matrix, one 8 x 8 tile per workgroup: reads and
  // writes of global memory both follow the local index's fast dimension.
  const std::int64_t rows = 16, cols = 24, t = 8;
  Kernel k("transpose");
  Buf in = k.add_buffer("in", F, Access::read);
  Buf out = k.add_buffer("out", F, Access::write);
  Shared tile = k.add_shared("tile", F, t * t);
  k.workgroup_size = t * t;
  k.global_size = rows * cols;
  const Expr lid = local_index(), group = workgroup_index();
  k.body.push_back(declare("tr", I, group / i32(cols / t)));
  k.body.push_back(declare("tc", I, group % i32(cols / t)));
  k.body.push_back(declare("r", I, lid / i32(t)));
  k.body.push_back(declare("c", I, lid % i32(t)));
  const Expr tr = var("tr", I), tc = var("tc", I), r = var("r", I), c = var("c", I);
  k.body.push_back(store(tile, r * i32(t) + c, load(in, (tr * i32(t) + r) * i32(cols) + tc * i32(t) + c, F)));
  k.body.push_back(barrier());
  k.body.push_back(store(out, (tc * i32(t) + r) * i32(rows) + tr * i32(t) + c, load(tile, c * i32(t) + r, F)));
  std::vector<float> a(rows * cols), b(rows * cols, -1.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  run(k, {bytes(a), bytes(b)});
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) BOOST_TEST(b[j * rows + i] == a[i * cols + j]);
}

BOOST_AUTO_TEST_CASE(local_and_workgroup_indices_split_the_global_index) {
  // Without shared memory too, and with a partial last workgroup.
  Kernel k("indices");
  Buf y = k.add_buffer("y", I, Access::write);
  k.global_size = 70;
  k.workgroup_size = 16;
  k.body.push_back(store(y, global_index(), workgroup_index() * i32(1000) + local_index()));
  std::vector<std::int32_t> out(70, -1);
  run(k, {bytes(out)});
  for (std::int32_t i = 0; i < 70; ++i) BOOST_TEST(out[static_cast<std::size_t>(i)] == (i / 16) * 1000 + i % 16);
}

BOOST_AUTO_TEST_CASE(barriers_without_shared_memory_run_in_workgroups) {
  Kernel k("barrier_only");
  Buf y = k.add_buffer("y", I, Access::write);
  k.global_size = 64;
  k.workgroup_size = 32;
  k.body = {barrier(), store(y, global_index(), local_index()), barrier()};
  std::vector<std::int32_t> out(64, -1);
  run(k, {bytes(out)});
  for (std::int32_t i = 0; i < 64; ++i) BOOST_TEST(out[static_cast<std::size_t>(i)] == i % 32);
}

BOOST_AUTO_TEST_CASE(verify_keeps_barriers_in_uniform_control_flow) {
  auto kernel = [](std::vector<Stmt> body, std::int64_t global_size = 128) {
    Kernel k("barriers");
    Buf y = k.add_buffer("y", F, Access::read_write);
    (void)y;
    k.add_shared("s", F, 64);
    k.global_size = global_size;
    k.workgroup_size = 64;
    k.body = std::move(body);
    return k;
  };
  const Buf y{0};
  BOOST_CHECK_NO_THROW(verify(workgroup_sum_kernel(2, 64, 6)));
  // A barrier in a branch, even one every invocation takes.
  BOOST_TEST(contains(internal_error([&] { verify(kernel({branch(local_index() < i32(64), {barrier()})})); }),
                      "barrier inside a branch"));
  BOOST_TEST(contains(internal_error([&] { verify(kernel({branch(boolean(true), {}, {barrier()})})); }),
                      "barrier inside a branch"));
  // Loops whose bounds depend on the invocation, directly or through a variable.
  BOOST_TEST(contains(internal_error([&] { verify(kernel({loop("i", i32(0), global_index(), {barrier()})})); }),
                      "barrier inside loop 'i'"));
  BOOST_TEST(contains(internal_error([&] {
                        verify(kernel({declare("n", I, cast(I, load(y, i32(0), F))),
                                       loop("i", i32(0), var("n", I), {barrier()})}));
                      }),
                      "barrier inside loop 'i'"));
  BOOST_TEST(contains(internal_error([&] {
                        verify(kernel({declare("n", I, i32(4)), branch(local_index() < i32(3), {assign("n", i32(2))}),
                                       loop("i", i32(0), var("n", I), {barrier()})}));
                      }),
                      "barrier inside loop 'i'"));
  // Uniform bounds (constants, workgroup_index) are fine.
  BOOST_CHECK_NO_THROW(verify(kernel({loop("i", i32(0), workgroup_index() + i32(2), {barrier()})})));
  // A ragged global size would leave a partial workgroup out of the barrier.
  BOOST_TEST(contains(internal_error([&] { verify(kernel({barrier()}, 100)); }),
                      "global_size 100 is not a multiple of workgroup_size 64"));
}

BOOST_AUTO_TEST_CASE(verify_checks_shared_arrays) {
  Kernel k("shared_checks");
  Buf y = k.add_buffer("y", F, Access::write);
  Shared s = k.add_shared("s", F, 1024);
  Shared n = k.add_shared("n", I, 16);
  k.global_size = 64;
  k.body.push_back(store(s, local_index(), f32(1.0)));
  k.body.push_back(barrier());
  k.body.push_back(store(y, global_index(), load(s, i32(0), F)));
  BOOST_TEST(shared_memory_bytes(k) == 4160u);
  BOOST_CHECK_NO_THROW(verify(k));
  BOOST_CHECK_NO_THROW(verify(k, 4160));
  BOOST_TEST(contains(internal_error([&] { verify(k, 4096); }), "needs 4160 bytes of shared memory; the target allows 4096"));
  BOOST_TEST(contains(internal_error([&] { k.add_shared("s", F, 4); }), "duplicate shared array name 's'"));
  BOOST_TEST(contains(internal_error([&] { k.add_shared("b", B, 4); }), "element type bool"));
  BOOST_TEST(contains(internal_error([&] { k.add_shared("z", F, 0); }), "has 0 elements"));
  Kernel bad = k;
  bad.body.push_back(store(n, i32(0), f32(2.0)));
  BOOST_TEST(contains(internal_error([&] { verify(bad); }), "store of a f32 value into shared array 1 'n' of type i32"));
  bad = k;
  bad.body.push_back(store(y, i32(0), load(Shared{5}, i32(0), F)));
  BOOST_TEST(contains(internal_error([&] { verify(bad); }), "shared array index 5 is invalid"));
}

BOOST_AUTO_TEST_CASE(prints_shared_memory_and_barriers) {
  const std::string text = print(workgroup_sum_kernel(2, 64, 6));
  BOOST_TEST(contains(text, "shared 0 partial: f32[64]\n"));
  BOOST_TEST(contains(text, "shared partial[local_index()] = x[global_index()]\n"));
  BOOST_TEST(contains(text, "  barrier()\n"));
  BOOST_TEST(contains(text, "y[workgroup_index()] = shared partial[0]"));
}

BOOST_AUTO_TEST_CASE(interpreter_reports_shared_memory_races) {
  auto run_body = [](std::vector<Stmt> body) {
    Kernel k("racy");
    Buf y = k.add_buffer("y", F, Access::write);
    (void)y;
    k.add_shared("s", F, 64);
    k.global_size = 128;
    k.workgroup_size = 64;
    k.body = std::move(body);
    std::vector<float> out(128);
    run(k, {bytes(out)});
  };
  const Shared s{0};
  const Buf y{0};
  const Expr lid = local_index();
  // Reading a neighbour's element without a barrier between.
  BOOST_TEST(contains(internal_error([&] {
                        run_body({store(s, lid, f32(1.0)),
                                  branch(lid > i32(0), {store(y, global_index(), load(s, lid - i32(1), F))})});
                      }),
                      "with no barrier between (a race)"));
  // Overwriting what another invocation read, before a barrier.
  BOOST_TEST(contains(internal_error([&] {
                        run_body({store(s, lid, f32(1.0)), barrier(),
                                  store(y, global_index(), load(s, (lid + i32(1)) % i32(64), F)),
                                  store(s, lid, f32(2.0))});
                      }),
                      "read by invocation"));
  // Reading an element nobody wrote in this workgroup.
  BOOST_TEST(contains(internal_error([&] {
                        run_body({branch(lid < i32(32), {store(s, lid, f32(1.0))}), barrier(),
                                  store(y, global_index(), load(s, i32(63) - lid, F))});
                      }),
                      "before any invocation of its workgroup wrote it"));
  // The same with barriers in place runs.
  BOOST_CHECK_NO_THROW(run_body({store(s, lid, f32(1.0)), barrier(),
                                 store(y, global_index(), load(s, (lid + i32(1)) % i32(64), F)), barrier(),
                                 store(s, lid, f32(2.0))}));
}

// ---- subgroups and texel buffers -------------------------------------------

// A kernel of `groups` workgroups of `wg` invocations in subgroups of `sg`.
Kernel subgroup_kernel(std::vector<Stmt> body, std::uint32_t sg = 8, std::uint32_t wg = 32, std::int64_t groups = 2) {
  Kernel k("subgroups");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf y = k.add_buffer("y", F, Access::write);
  (void)x;
  (void)y;
  k.global_size = groups * wg;
  k.workgroup_size = wg;
  k.subgroup_size = sg;
  k.body = std::move(body);
  return k;
}

BOOST_AUTO_TEST_CASE(subgroup_lane_and_id_split_the_local_index) {
  Kernel k("lanes");
  Buf y = k.add_buffer("y", I, Access::write);
  k.global_size = 64;
  k.workgroup_size = 32;
  k.subgroup_size = 8;
  k.body.push_back(store(y, global_index(), subgroup_id() * i32(100) + subgroup_lane()));
  std::vector<std::int32_t> out(64, -1);
  run(k, {bytes(out)});
  for (std::int32_t i = 0; i < 64; ++i) BOOST_TEST(out[static_cast<std::size_t>(i)] == (i % 32) / 8 * 100 + i % 8);
}

BOOST_AUTO_TEST_CASE(broadcast_reads_the_source_lanes_value_in_lockstep) {
  const Buf x{0}, y{1};
  // v is each lane's own element; the broadcast takes lane 3's (of the same
  // subgroup), and a broadcast nested in another's operand is evaluated
  // first. The assignment to v after it must not leak into other lanes'
  // reads: every lane reads its source before any lane runs the statement.
  Kernel k = subgroup_kernel({declare("v", F, load(x, global_index(), F)),
                              assign("v", subgroup_broadcast(var("v", F), 3) * f32(10.0) +
                                              subgroup_broadcast(var("v", F) + subgroup_broadcast(var("v", F), 7), 1)),
                              store(y, global_index(), var("v", F))});
  std::vector<float> in(64), out(64, -1.0f);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  run(k, {bytes(in), bytes(out)});
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::size_t base = i / 8 * 8;
    BOOST_TEST(out[i] == in[base + 3] * 10.0f + (in[base + 1] + in[base + 7]));
  }
}

BOOST_AUTO_TEST_CASE(broadcasts_run_inside_uniform_loops_and_branches) {
  const Buf x{0}, y{1};
  // A running sum of lane k's element over k, in a loop, under a uniform branch.
  std::vector<Stmt> loop_body;
  for (int lane = 0; lane < 4; ++lane)
    loop_body.push_back(
        assign("s", var("s", F) + subgroup_broadcast(load(x, global_index(), F) * cast(F, var("r", I)), lane)));
  Kernel k = subgroup_kernel({declare("s", F, f32(0.0)),
                              branch(workgroup_index() < i32(5), {loop("r", i32(1), i32(3), loop_body)}),
                              store(y, global_index(), var("s", F))},
                             4, 16, 3);
  std::vector<float> in(48), out(48, -1.0f);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 7);
  run(k, {bytes(in), bytes(out)});
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::size_t base = i / 4 * 4;
    const float lanes = in[base] + in[base + 1] + in[base + 2] + in[base + 3];
    BOOST_TEST(out[i] == lanes * 1.0f + lanes * 2.0f);
  }
}

BOOST_AUTO_TEST_CASE(verify_keeps_subgroup_operations_uniform_and_declared) {
  const Buf x{0}, y{1};
  const Expr v = load(x, global_index(), F);
  auto store_it = [&](Expr e) { return store(y, global_index(), e); };
  BOOST_CHECK_NO_THROW(verify(subgroup_kernel({store_it(subgroup_broadcast(v, 7))})));
  // Lanes past the subgroup, a kernel without a subgroup size, bad sizes.
  BOOST_TEST(contains(internal_error([&] { verify(subgroup_kernel({store_it(subgroup_broadcast(v, 8))})); }),
                      "subgroup_broadcast from lane 8 of a subgroup of 8"));
  BOOST_TEST(contains(internal_error([&] { verify(subgroup_kernel({store_it(cast(F, subgroup_lane()))}, 0)); }),
                      "uses subgroup operations but declares no subgroup_size"));
  BOOST_TEST(contains(internal_error([&] { verify(subgroup_kernel({}, 6)); }), "subgroup_size 6 is not a power of two"));
  BOOST_TEST(contains(internal_error([&] { verify(subgroup_kernel({}, 64, 32)); }),
                      "workgroup_size 32 is not a multiple of subgroup_size 64"));
  Kernel ragged = subgroup_kernel({store_it(subgroup_broadcast(v, 0))});
  ragged.global_size = 40;
  BOOST_TEST(contains(internal_error([&] { verify(ragged); }), "every subgroup must be whole"));
  // Divergent control flow: a branch on the lane, a loop bounded by a load,
  // a select or && operand, a branch condition.
  BOOST_TEST(contains(internal_error([&] {
                        verify(subgroup_kernel({branch(subgroup_lane() < i32(4), {store_it(subgroup_broadcast(v, 0))})}));
                      }),
                      "inside a branch whose condition may differ"));
  BOOST_TEST(contains(internal_error([&] {
                        verify(subgroup_kernel(
                            {loop("i", i32(0), cast(I, v), {store_it(subgroup_broadcast(v, 0))})}));
                      }),
                      "inside loop 'i'"));
  BOOST_TEST(contains(internal_error([&] {
                        verify(subgroup_kernel({store_it(select(v > f32(0.0), subgroup_broadcast(v, 1), v))}));
                      }),
                      "under a select"));
  BOOST_TEST(contains(internal_error([&] {
                        verify(subgroup_kernel(
                            {branch(boolean(true) && subgroup_broadcast(v, 1) > f32(0.0), {store_it(v)})}));
                      }),
                      "may not appear in loop bounds or branch conditions"));
  BOOST_TEST(contains(internal_error([&] { subgroup_broadcast(v > f32(0.0), 0); }), "subgroup_broadcast of a bool"));
  // A uniform branch is fine.
  BOOST_CHECK_NO_THROW(
      verify(subgroup_kernel({branch(workgroup_index() > i32(0), {store_it(subgroup_broadcast(v, 2))})})));
}

BOOST_AUTO_TEST_CASE(texel_buffers_load_scalars_and_whole_texels) {
  Kernel k("texels");
  Buf t1 = k.add_texel_buffer("t1", 1);
  Buf t4 = k.add_texel_buffer("t4", 4);
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = 2;
  k.body.push_back(load_vector({"a", "b", "c", "d"}, t4, global_index(), F));
  k.body.push_back(store(y, global_index(),
                         var("a", F) + var("d", F) * f32(10.0) + load(t1, global_index(), F) * f32(100.0) +
                             load(t4, global_index() * i32(4) + i32(2), F) * f32(1000.0)));
  BOOST_TEST(contains(print(k), "buffer 1 t4: f32 read texel4\n"));
  std::vector<float> one = {1, 2}, four = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, out(2, -1.0f);
  run(k, {bytes(one), bytes(four), bytes(out)});
  BOOST_TEST(out[0] == 1.0f + 40.0f + 100.0f + 3000.0f);
  BOOST_TEST(out[1] == 5.0f + 80.0f + 200.0f + 7000.0f);
  // Elements 8 and 9 are past the last whole texel.
  Kernel tail = k;
  tail.body = {store(y, global_index(), load(t4, i32(8), F))};
  BOOST_TEST(contains(internal_error([&] { run(tail, {bytes(one), bytes(four), bytes(out)}); }),
                      "at index 8 is out of bounds (size 8 elements)"));
  // A vector load of another width than the texel's, a write, a bad width.
  Kernel wrong = k;
  wrong.body = {load_vector({"a", "b"}, t4, i32(0), F), store(y, i32(0), var("a", F))};
  BOOST_TEST(contains(internal_error([&] { verify(wrong); }), "texel buffer 1 't4' of texel width 4"));
  wrong.body = {load_vector({"a", "b", "c", "d"}, t1, i32(0), F), store(y, i32(0), var("a", F))};
  BOOST_TEST(contains(internal_error([&] { verify(wrong); }), "of texel width 1"));
  BOOST_TEST(contains(internal_error([&] { k.add_texel_buffer("t3", 3); }), "texel width 3"));
  wrong = k;
  wrong.buffers[0].access = Access::read_write;
  BOOST_TEST(contains(internal_error([&] { verify(wrong); }), "texel buffer 't1' must be read-only f32, f16 or bf16"));
}

BOOST_AUTO_TEST_CASE(prints_subgroup_operations) {
  const Buf x{0}, y{1};
  const std::string text =
      print(subgroup_kernel({store(y, global_index(), subgroup_broadcast(load(x, global_index(), F), 5) +
                                                          cast(F, subgroup_lane() + subgroup_id()))}));
  BOOST_TEST(contains(text, "workgroup_size 32, subgroup_size 8)"));
  BOOST_TEST(contains(text, "subgroup_broadcast(x[global_index()], lane 5)"));
  BOOST_TEST(contains(text, "(subgroup_lane() + subgroup_id())"));
}
