// gemm_bench: one matrix product's throughput, the GEMM row of
// tools/gpu-check.sh. Y = A B, A [M, K] an input and B [K, N] a weight,
// compiled (default mode) per precision:
//   f32   float32_matmul_precision=highest: f32 products;
//   tf32  float32_matmul_precision=high: the device's TF32 matrix units;
//   f16, bf16  the model's tensors in that type (Model::with_float_type, as
//         PyTorch's model.half()): the matrix units of that precision.
// The time is the product's kernel alone (CompiledModel::profile: device
// timestamps where the backend has them, else a submit's wall time), the
// median of --iters runs; TFLOP/s = 2 M N K / time. A markdown table on
// stdout, for setting beside torch.matmul's (tools/gpu_check_pytorch.py).
//
//   build/tools/gemm_bench --backend cuda --size 4096 --precisions tf32,f16
//   build/tools/gemm_bench --backend vulkan --size 512 --iters 5
#include <kiln/builder.h>
#include <kiln/kiln.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

kiln::Tensor random_tensor(kiln::Shape shape, unsigned seed) {
  std::size_t count = 1;
  for (std::int64_t d : shape) count *= static_cast<std::size_t>(d);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(rng);
  return kiln::Tensor::from_f32(std::move(shape), std::move(values));
}

kiln::Model product(std::int64_t m, std::int64_t n, std::int64_t k) {
  kiln::Builder b("gemm");
  const kiln::Builder::Value a = b.input("a", kiln::DType::f32, {m, k});
  const kiln::Builder::Value w = b.constant("b", random_tensor({k, n}, 2));
  return b.build({b.matmul(a, w)});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"one matrix product's throughput per precision (the GEMM row of tools/gpu-check.sh)"};
  std::string backend = "vulkan", device;
  std::int64_t size = 4096;
  std::vector<std::int64_t> shape;
  std::vector<std::string> precisions = {"f32", "tf32", "f16"};
  int iters = 20;
  app.add_option("--backend", backend, "vulkan, cuda, hip, cpu")->capture_default_str();
  app.add_option("--device", device, "device index or part of its name (default: the first)");
  app.add_option("--size", size, "M = N = K")->capture_default_str()->check(CLI::Range(1, 65536));
  app.add_option("--shape", shape, "M,N,K instead of --size")->delimiter(',')->expected(3);
  app.add_option("--precisions", precisions, "comma-separated: f32, tf32, f16, bf16")
      ->delimiter(',')
      ->check(CLI::IsMember({"f32", "tf32", "f16", "bf16"}))
      ->capture_default_str();
  app.add_option("--iters", iters, "profiled runs; the median is reported")->capture_default_str()->check(
      CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);
  const std::int64_t m = shape.empty() ? size : shape[0];
  const std::int64_t n = shape.empty() ? size : shape[1];
  const std::int64_t k = shape.empty() ? size : shape[2];
  if (std::min({m, n, k}) < 1) {
    std::fprintf(stderr, "gemm_bench: --shape needs three positive extents\n");
    return 2;
  }

  const kiln::Model f32_model = product(m, n, k);
  const std::vector<kiln::Tensor> inputs = {random_tensor({m, k}, 1)};
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  std::printf("| precision | M x N x K | kernel | ms | TFLOP/s | timed by |\n|---|---|---|---:|---:|---|\n");
  int status = 0;
  for (const std::string& precision : precisions) {
    try {
      kiln::CompileOptions options;
      options.backend = backend;
      options.device = device;
      options.settings = {{"float32_matmul_precision", precision == "tf32" ? "high" : "highest"}};
      const kiln::Model model = precision == "f16"    ? f32_model.with_float_type(kiln::DType::f16)
                                : precision == "bf16" ? f32_model.with_float_type(kiln::DType::bf16)
                                                      : f32_model;
      kiln::CompiledModel compiled = kiln::compile(model, options);
      compiled(inputs);  // compiles
      const std::vector<kiln::KernelTiming> timings = compiled.profile(inputs, iters);
      if (timings.empty()) throw kiln::Error(kiln::ErrorKind::Internal, "the profile timed no dispatch");
      // The product is the costliest dispatch (the others convert the input and output).
      const kiln::KernelTiming& gemm = *std::max_element(
          timings.begin(), timings.end(), [](const auto& a, const auto& b) { return a.ms < b.ms; });
      std::printf("| %s | %lld x %lld x %lld | %s | %.4f | %.2f | %s |\n", precision.c_str(),
                  static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), gemm.kernel.c_str(),
                  gemm.ms, flops / (gemm.ms * 1e-3) / 1e12, gemm.device_time ? "device timestamps" : "host, per submit");
    } catch (const kiln::Error& e) {
      std::printf("| %s | %lld x %lld x %lld | (failed) | | | %s |\n", precision.c_str(), static_cast<long long>(m),
                  static_cast<long long>(n), static_cast<long long>(k), e.what());
      status = 1;
    }
    std::fflush(stdout);
  }
  return status;
}
