// GLSL -> validated, optimised SPIR-V 1.3.
#include "backends/vulkan/compiler.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <glslang/build_info.h>
#include <shaderc/shaderc.hpp>
#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/optimizer.hpp>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#ifndef KILN_SHADERC_VERSION
#define KILN_SHADERC_VERSION "unknown"
#endif

namespace kiln::backend::vulkan {
namespace {

constexpr const char* kTargetArch = "spirv1.3";
constexpr spv_target_env kSpirvEnvironment = SPV_ENV_VULKAN_1_1;

[[noreturn]] void throw_compile_error(const KernelSource& source, const std::string& stage, const std::string& log) {
  throw_error(ErrorKind::Internal, stage + " of kernel '" + source.name + "' failed:\n" + log +
                                       "\n--- GLSL source ---\n" + numbered_source(source.text));
}

// Runs SPIRV-Tools' validator; returns its messages (empty when valid).
std::string validate(const std::vector<std::uint32_t>& words) {
  spvtools::SpirvTools tools(kSpirvEnvironment);
  std::string messages;
  tools.SetMessageConsumer([&messages](spv_message_level_t, const char*, const spv_position_t& position,
                                       const char* message) {
    messages += "word " + std::to_string(position.index) + ": " + message + "\n";
  });
  if (tools.Validate(words)) return {};
  return messages.empty() ? "invalid SPIR-V" : messages;
}

}  // namespace

struct GlslCompiler::Shaderc {
  shaderc::Compiler compiler;
  shaderc::CompileOptions options;
};

GlslCompiler::GlslCompiler() = default;
GlslCompiler::~GlslCompiler() = default;

const GlslCompiler::Shaderc& GlslCompiler::shaderc() const {
  std::call_once(shaderc_once_, [this] {
    auto created = std::make_unique<Shaderc>();
    KILN_CHECK(created->compiler.IsValid(), ErrorKind::Internal, "shaderc failed to initialise");
    created->options.SetSourceLanguage(shaderc_source_language_glsl);
    created->options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_1);
    created->options.SetTargetSpirv(shaderc_spirv_version_1_3);
    // SPIRV-Tools optimises below, once, with its performance recipe.
    created->options.SetOptimizationLevel(shaderc_optimization_level_zero);
    shaderc_ = std::move(created);
  });
  return *shaderc_;
}

std::string GlslCompiler::version() const {
  return std::string("shaderc ") + KILN_SHADERC_VERSION + " (glslang " + std::to_string(GLSLANG_VERSION_MAJOR) +
         "." + std::to_string(GLSLANG_VERSION_MINOR) + "." + std::to_string(GLSLANG_VERSION_PATCH) +
         "), SPIRV-Tools " + spvSoftwareVersionDetailsString() + ", vulkan1.1/spirv1.3, performance passes";
}

KernelBinary GlslCompiler::compile(const KernelSource& source, const TargetDesc& target) const {
  KILN_CHECK(source.language == "glsl", ErrorKind::InvalidArgument,
             "the Vulkan compiler takes GLSL; kernel '" + source.name + "' is " + source.language);
  KILN_CHECK(target.arch == kTargetArch, ErrorKind::InvalidArgument,
             "the Vulkan compiler targets " + std::string(kTargetArch) + "; kernel '" + source.name +
                 "' asked for '" + target.arch + "'");
  const Shaderc& sc = shaderc();
  const shaderc::SpvCompilationResult result = sc.compiler.CompileGlslToSpv(
      source.text, shaderc_compute_shader, (source.name + ".comp").c_str(), "main", sc.options);
  if (result.GetCompilationStatus() != shaderc_compilation_status_success)
    throw_compile_error(source, "GLSL compilation", result.GetErrorMessage());

  std::vector<std::uint32_t> words(result.cbegin(), result.cend());
  if (std::string problems = validate(words); !problems.empty())
    throw_compile_error(source, "SPIR-V validation", problems);

  spvtools::Optimizer optimizer(kSpirvEnvironment);
  std::string optimizer_log;
  optimizer.SetMessageConsumer([&optimizer_log](spv_message_level_t, const char*, const spv_position_t&,
                                                const char* message) { optimizer_log += std::string(message) + "\n"; });
  optimizer.RegisterPerformancePasses();
  std::vector<std::uint32_t> optimised;
  if (!optimizer.Run(words.data(), words.size(), &optimised))
    throw_compile_error(source, "SPIR-V optimisation", optimizer_log);
  if (std::string problems = validate(optimised); !problems.empty())
    throw_compile_error(source, "SPIR-V validation after optimisation", problems);

  KernelBinary binary;
  binary.format = binary_format(target);
  binary.data.resize(optimised.size() * sizeof(std::uint32_t));
  std::memcpy(binary.data.data(), optimised.data(), binary.data.size());
  binary.log = result.GetNumWarnings() > 0 ? result.GetErrorMessage() : std::string();
  return binary;
}

}  // namespace kiln::backend::vulkan
