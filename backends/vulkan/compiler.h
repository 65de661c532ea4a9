// GLSL -> SPIR-V 1.3 (Vulkan 1.1 environment): shaderc compiles, SPIRV-Tools
// validates, optimises (performance passes) and validates again.
#pragma once

#include "backends/backend.h"

#include <memory>
#include <mutex>

namespace kiln::backend::vulkan {

class GlslCompiler final : public KernelCompiler {
 public:
  GlslCompiler();
  ~GlslCompiler() override;

  // "shaderc 2023.2 (glslang 12.0.0), SPIRV-Tools v2023.1 ..., vulkan1.1/spirv1.3, performance passes".
  std::string version() const override;
  std::string binary_format(const TargetDesc&) const override { return "spirv"; }
  // Throws Error(InvalidArgument) for a language other than "glsl" or a target
  // whose arch is not "spirv1.3"; Error(Internal) with the compiler's log and
  // the numbered source when the code does not compile or validate.
  // Thread-safe.
  KernelBinary compile(const KernelSource& source, const TargetDesc& target) const override;

 private:
  struct Shaderc;  // the shaderc compiler and options, created on first use (glslang start-up is slow)
  const Shaderc& shaderc() const;

  mutable std::once_flag shaderc_once_;
  mutable std::unique_ptr<Shaderc> shaderc_;
};

}  // namespace kiln::backend::vulkan
