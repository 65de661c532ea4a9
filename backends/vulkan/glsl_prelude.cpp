// GLSL's prelude. The erf/tanh approximations are generated from the
// coefficient tables below, which the host mirrors evaluate too, so the
// tested formula and the emitted one cannot drift apart.
#include "backends/vulkan/glsl_prelude.h"

#include <array>
#include <charconv>
#include <cmath>
#include <span>
#include <string>

namespace kiln::backend {
namespace {

// A polynomial piece on [previous upper, upper) of |x|. Odd pieces compute
// a * P(a*a - center) (odd functions keep their relative accuracy near 0);
// the others P(a - center). Coefficients are lowest order first.
struct Piece {
  float upper;
  float center;
  bool odd;
  std::span<const float> coefficients;
};

// Coefficients from Chebyshev interpolation of erf(x)/x in x^2 on [0, 1] and
// of erf(x) on [1, 2.5] and [2.5, 3.92], converted to monomials around the
// centre. Max error of the f32 evaluation is below 1e-7 on each piece.
constexpr std::array<float, 7> kErfNear0 = {0.965468764f,   -0.281072199f,    0.0794099867f,  -0.018283356f,
                                            0.00348021672f, -0.000565410184f, 7.87587487e-05f};
constexpr std::array<float, 12> kErfMid = {0.986671686f,    0.0527749956f,   -0.092356123f,    0.090157263f,
                                           -0.0481047109f,  0.00662489049f,  0.00898213685f,   -0.00606283592f,
                                           0.000663779269f, 0.000908666232f, -0.000335281511f, -2.99947769e-05f};
constexpr std::array<float, 10> kErfFar = {0.999994338f,     3.7795322e-05f,  -0.000121335339f, 0.000247062533f,
                                           -0.000355878612f, 0.000382615515f, -0.00031573436f,  0.000200049239f,
                                           -8.99746374e-05f, 2.12220493e-05f};
constexpr std::array<Piece, 3> kErfPieces = {{
    {1.0f, 0.5f, true, kErfNear0},
    {2.5f, 1.75f, false, kErfMid},
    {3.92f, 3.21f, false, kErfFar},
}};
// erf(|x|) >= 1 - 4e-8 beyond the last piece, which is 1 in f32.
constexpr float kErfSaturation = 3.92f;

// tanh(x)/x in x^2 on [0, 0.55], same construction; beyond it
// 1 - 2 / (exp(2|x|) + 1) has no cancellation (tanh >= 0.5).
constexpr std::array<float, 6> kTanhNear0 = {1.0f,          -0.333333105f, 0.133324564f,
                                             -0.053842321f, 0.0210382156f, -0.0062336335f};
constexpr std::array<Piece, 1> kTanhPieces = {{{0.55f, 0.0f, true, kTanhNear0}}};
// tanh(|x|) rounds to 1 in f32 from here on; clamping also keeps exp(2|x|)
// finite (the usual (e^2x - 1) / (e^2x + 1) gives inf/inf = NaN).
constexpr float kTanhSaturation = 10.0f;

std::string float_literal(float value) {
  char buf[32];  // the shortest round-trip form of a float is at most 15 characters
  std::string text(buf, std::to_chars(buf, buf + sizeof buf, value).ptr);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";  // keep it a float literal
  return text;
}

// c0 + u * (c1 + u * (c2 + ...)), the order the host mirror uses.
std::string horner_text(std::span<const float> c, const std::string& u) {
  std::string text = float_literal(c.back());
  for (std::size_t i = c.size() - 1; i-- > 0;) text = float_literal(c[i]) + " + " + u + " * (" + text + ")";
  return text;
}

float horner(std::span<const float> c, float u) {
  float r = c.back();
  for (std::size_t i = c.size() - 1; i-- > 0;) r = c[i] + u * r;
  return r;
}

std::string glsl_piece_text(const Piece& p) {
  const std::string centre = p.center == 0.0f ? "" : " - " + float_literal(p.center);
  if (p.odd) return "float u = a * a" + centre + ";\n    r = a * (" + horner_text(p.coefficients, "u") + ");\n";
  return "float u = a" + centre + ";\n    r = " + horner_text(p.coefficients, "u") + ";\n";
}

float host_piece(const Piece& p, float a) {
  if (p.odd) return a * horner(p.coefficients, a * a - p.center);
  return horner(p.coefficients, a - p.center);
}

// if (a < upper0) { piece0 } else if (a < upper1) { piece1 } ... else
std::string glsl_pieces_text(std::span<const Piece> pieces) {
  std::string text;
  for (const Piece& p : pieces) {
    text += (text.empty() ? "  if" : "  } else if") + std::string(" (a < ") + float_literal(p.upper) + ") {\n    ";
    text += glsl_piece_text(p);
  }
  return text;
}

std::string make_glsl_prelude() {
  std::string text = "#version 450\n\n";
  text += "// erf(x) (GLSL has none): piecewise polynomials fitted to erf, |error| < 2e-7.\n";
  text += "float kiln_erf(float x) {\n  float a = abs(x);\n  float r;\n";
  text += glsl_pieces_text(kErfPieces);
  text += "  } else {\n    r = a >= " + float_literal(kErfSaturation) + " ? 1.0 : a;  // NaN stays NaN\n  }\n";
  text += "  return x < 0.0 ? -r : r;\n}\n\n";
  text += "// tanh(x) that cannot overflow to inf/inf for large |x|, accurate near 0.\n";
  text += "float kiln_tanh(float x) {\n  float a = abs(x);\n  float r;\n";
  text += glsl_pieces_text(kTanhPieces);
  text += "  } else if (a < " + float_literal(kTanhSaturation) + ") {\n";
  text += "    r = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);\n";
  text += "  } else {\n    r = a >= " + float_literal(kTanhSaturation) + " ? 1.0 : a;  // NaN stays NaN\n  }\n";
  text += "  return x < 0.0 ? -r : r;\n}\n";
  return text;
}

// The first piece whose range holds `a`, evaluated; false past the last one.
bool host_pieces(std::span<const Piece> pieces, float a, float& result) {
  for (const Piece& p : pieces) {
    if (a < p.upper) {
      result = host_piece(p, a);
      return true;
    }
  }
  return false;
}

}  // namespace

const std::string& glsl_prelude() {
  static const std::string text = make_glsl_prelude();
  return text;
}

float glsl_prelude_erf(float x) {
  const float a = std::fabs(x);
  float r;
  if (!host_pieces(kErfPieces, a, r)) r = a >= kErfSaturation ? 1.0f : a;
  return x < 0.0f ? -r : r;
}

float glsl_prelude_tanh(float x) {
  const float a = std::fabs(x);
  float r;
  if (!host_pieces(kTanhPieces, a, r)) {
    if (a < kTanhSaturation)
      r = 1.0f - 2.0f / (std::exp(2.0f * a) + 1.0f);
    else
      r = a >= kTanhSaturation ? 1.0f : a;
  }
  return x < 0.0f ? -r : r;
}

}  // namespace kiln::backend
