// The cpu backend's C: the null template's C99 with what running it needs.
// A worker thread runs a workgroup's invocations one after another (as
// fibres when the kernel has barriers), so a workgroup's shared arrays are
// the thread's own (__thread), and a barrier calls the host, which switches
// to the next invocation of the group (workers.h).
#include "backends/cpu/language.h"


namespace kiln::backend::cpu {
namespace {

// exp, tanh, erf, fmin and fmax as the C compiler can vectorise: no call
// into libm and no branch (selects are bit masks). A call to expf, or a
// branch, in a kernel's epilogue (sigmoid, SiLU, GELU, clip) keeps GCC's SLP
// vectoriser off the whole kernel, its accumulation loop included
// (docs/benchmarks/cpu-backend.md). exp, tanh and erf are within 1 ulp of
// the correctly rounded result (exp: range reduction by ln 2 in two parts, a
// degree-7 Taylor polynomial, 2^k in two factors so that subnormal and
// infinite results come out right; tanh: its odd Taylor series below 0.55,
// else 1 - 2 / (e^2x + 1); erf: its Taylor series below 0.875, else 1 - erfc
// with log(erfc) fitted); fmin and fmax keep C's NaN rules.
constexpr const char* kInlineMath = R"(
/* a float's bits and back */
__attribute__((always_inline)) static inline int32_t kiln_bits(float x) {
  int32_t bits;
  __builtin_memcpy(&bits, &x, sizeof bits);
  return bits;
}
__attribute__((always_inline)) static inline float kiln_float(int32_t bits) {
  float x;
  __builtin_memcpy(&x, &bits, sizeof x);
  return x;
}
/* take_a (0 or 1) ? a : b, as a mask */
__attribute__((always_inline)) static inline float kiln_select(int32_t take_a, float a, float b) {
  return kiln_float((kiln_bits(a) & -take_a) | (kiln_bits(b) & ~-take_a));
}
/* fminf and fmaxf as C has them (a NaN operand gives the other one), without the call */
__attribute__((always_inline)) static inline float kiln_fminf(float a, float b) {
  return kiln_select(a != a, b, kiln_select(b < a, b, a));
}
__attribute__((always_inline)) static inline float kiln_fmaxf(float a, float b) {
  return kiln_select(a != a, b, kiln_select(b > a, b, a));
}
__attribute__((always_inline)) static inline float kiln_expf(float x) {
  x = kiln_select(x < -104.0f, -104.0f, x);
  x = kiln_select(x > 89.0f, 89.0f, x);
  const float k = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - k * 0.693359375f) - k * -2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t ki = (int32_t)k;
  const int32_t half = ki >> 1;
  return p * kiln_float((half + 127) << 23) * kiln_float((ki - half + 127) << 23);
}
__attribute__((always_inline)) static inline float kiln_tanhf(float x) {
  const float a = kiln_float(kiln_bits(x) & 0x7fffffff);
  /* |x| < 0.55: the odd Taylor series to x^19 (error below 1e-8 relative) */
  const float a2 = a * a;
  float s = 18888466084.0f / 194896477400625.0f;
  s = s * a2 + -443861162.0f / 1856156927625.0f;
  s = s * a2 + 6404582.0f / 10854718875.0f;
  s = s * a2 + -929569.0f / 638512875.0f;
  s = s * a2 + 21844.0f / 6081075.0f;
  s = s * a2 + -1382.0f / 155925.0f;
  s = s * a2 + 62.0f / 2835.0f;
  s = s * a2 + -17.0f / 315.0f;
  s = s * a2 + 2.0f / 15.0f;
  s = s * a2 + -1.0f / 3.0f;
  const float small = a + a * (a2 * s);
  /* otherwise 1 - 2 / (e^(2|x|) + 1) */
  const float large = 1.0f - 2.0f / (kiln_expf(2.0f * a) + 1.0f);
  const float t = kiln_select(a < 0.55f, small, large);
  return kiln_float(kiln_bits(t) | (kiln_bits(x) & (int32_t)0x80000000));
}
__attribute__((always_inline)) static inline float kiln_erff(float x) {
  const float a = kiln_float(kiln_bits(x) & 0x7fffffff);
  /* below 0.875: the Taylor series, to a^21 */
  const float a2 = a * a;
  float s = 1.480719282e-08f;
  s = s * a2 + -1.636584469e-07f;
  s = s * a2 + 1.646211437e-06f;
  s = s * a2 + -1.492565036e-05f;
  s = s * a2 + 1.205533298e-04f;
  s = s * a2 + -8.548327023e-04f;
  s = s * a2 + 5.223977625e-03f;
  s = s * a2 + -2.686617065e-02f;
  s = s * a2 + 1.128379167e-01f;
  s = s * a2 + -3.761263890e-01f;
  const float small = a + a * (1.283791671e-01f + a2 * s); /* 2/sqrt(pi) = 1 + 0.128...: a stays exact */
  /* above: 1 - exp(g(a) - a^2), g = log(erfc) + a^2 as a degree-10 polynomial in
     u = (a - 2.4375) / 1.5625 fitted at Chebyshev nodes of [0.875, 4] (error below 4e-9);
     past 4, erfc is below half an ulp of 1 */
  const float ac = kiln_select(a > 4.0f, 4.0f, a);
  const float u = (ac - 2.4375f) / 1.5625f;
  float g = -5.070757225e-06f;
  g = g * u + -1.199068075e-06f;
  g = g * u + 6.971329955e-05f;
  g = g * u + -3.181062563e-04f;
  g = g * u + 1.202972372e-03f;
  g = g * u + -4.195839517e-03f;
  g = g * u + 1.371934608e-02f;
  g = g * u + -4.355022656e-02f;
  g = g * u + 1.420750410e-01f;
  g = g * u + -5.622240694e-01f;
  g = g * u + -1.534550876e+00f;
  const float large = 1.0f - kiln_expf(g - ac * ac);
  const float r = kiln_select(a < 0.875f, small, large);
  return kiln_float(kiln_bits(r) | (kiln_bits(x) & (int32_t)0x80000000));
}
)";

}  // namespace

const LanguageTable& cpu_language() {
  static const LanguageTable table = [] {
    LanguageTable t = c99_language(
        std::string("// The host's barrier (backends/cpu/workers.h), set per worker thread.\n"
        "static __thread void (*kiln_barrier_fn)(void*) __attribute__((unused));\n"
        "static __thread void* kiln_barrier_ctx __attribute__((unused));\n") +
        kInlineMath);
    // static: the entry points the compiler appends (compiler.cpp) call it,
    // and the C compiler inlines it into their loops.
    t.kernel_header = "static void {name}({params})";
    t.shared_param_decl = "";
    t.shared_global_decl = "static __thread {type} {name}[{count}];";
    t.barrier = "kiln_barrier_fn(kiln_barrier_ctx);";
    t.barrier_global_decl = "";
    // The cpu target has no subgroups (TargetDesc::subgroup_size 0): kernels
    // using them are never planned for it; these keep the table complete.
    t.subgroup_lane_expr = "0";
    t.subgroup_id_expr = "((int32_t)(kiln_global_id.x % {wg}u))";
    t.exp = "kiln_expf({a})";
    t.fmin = "kiln_fminf({a}, {b})";
    t.fmax = "kiln_fmaxf({a}, {b})";
    t.tanh = "kiln_tanhf({a})";
    t.erf = "kiln_erff({a})";
    return t;
  }();
  return table;
}

}  // namespace kiln::backend::cpu
