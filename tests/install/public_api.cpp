// Built against an installed kiln (tests/install/consumers.sh, headers mode):
// trace.h's own example, Builder::op with attributes, and the calls that need
// no device (modes, kernel sources, the tuning database's names), so that
// what the public headers declare can be called with the public headers
// alone, and libkiln's errors caught as kiln::Error across the library
// boundary.
#include <kiln/kiln.h>
#include <kiln/sources.h>
#include <kiln/trace.h>
#include <kiln/tune.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

int main() {
  // trace.h's example, as its comment writes it.
  auto fn = [](const std::vector<kiln::Tensor>& in) {
    kiln::Tensor h = kiln::relu(kiln::matmul(in[0], in[1]));
    if (kiln::item(kiln::op("ReduceMax", {h}, {})[0]) > 1.0)  // graph break
      h = h * h;
    return std::vector<kiln::Tensor>{h};
  };
  const kiln::Tensor a = kiln::Tensor::from_f32({2, 2}, {1, 2, 3, 4});
  const kiln::Tensor b = kiln::Tensor::from_f32({2, 2}, {1, 0, 0, 1});
  kiln::TracedFunction f = kiln::compile(fn, {a, b});
  const std::vector<kiln::Tensor> out = f({a, b});
  // relu(a @ I) = a, whose largest value 4 > 1, so h * h.
  std::printf("traced: %zu graph break(s); out = [%g %g %g %g]\n", f.graph_breaks().size(),
              double(out[0].values<float>()[0]), double(out[0].values<float>()[1]), double(out[0].values<float>()[2]),
              double(out[0].values<float>()[3]));

  // Builder::op: any registered op by name, with attributes.
  kiln::Builder builder("attributes");
  const auto x = builder.input("x", kiln::DType::f32, {2, 3});
  kiln::Attributes attrs;
  attrs.set("axes", std::vector<std::int64_t>{1});
  attrs.set("keepdims", std::int64_t{0});
  const auto mean = builder.op("ReduceMean", {x}, attrs)[0];
  kiln::Model model = builder.build({mean});
  kiln::EagerModel eager = kiln::eager(model);
  const kiln::Tensor means = eager({kiln::Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6})})[0];
  std::printf("ReduceMean over axis 1: shape %s = [%g %g]\n", kiln::shape_str(means.shape()).c_str(),
              double(means.values<float>()[0]), double(means.values<float>()[1]));

  // Errors thrown inside libkiln are caught here by their type, which needs
  // kiln::Error's typeinfo to match across the library boundary. libkiln
  // exports it (KILN_API; the linkage suite checks), so it matches on any C++
  // runtime, not only where typeinfo is compared by name (libstdc++ does).
  const auto report = [](const char* what, auto&& call) {
    try {
      call();
      std::printf("%s: no error\n", what);
    } catch (const kiln::Error& error) {
      std::printf("%s: caught kiln::Error (%s)\n", what, std::string(kiln::error_kind_name(error.kind())).c_str());
    } catch (const std::exception& error) {
      std::printf("%s: caught another exception: %s\n", what, error.what());
    }
  };
  // The calls without a device: every mode, kernel sources, the tuning
  // database's names (these link only where libkiln exports them).
  std::printf("modes:");
  for (kiln::Mode mode : kiln::all_modes()) std::printf(" %s", std::string(kiln::mode_name(mode)).c_str());
  std::printf("\nsource targets:");
  for (const std::string& target : kiln::source_targets()) std::printf(" %s", target.c_str());
  const kiln::KernelSources c = kiln::kernel_sources(model, "c");
  std::printf("\nc99 kernels of the ReduceMean model: %zu\n", c.kernels.size());
  std::printf("tuning database of /var/cache/kiln: %s\n", kiln::default_tuning_database("/var/cache/kiln").c_str());
  report("tuning records of a missing file", [] { kiln::tuning_records("/nonexistent/tuning.db"); });

  // A service's hooks: kiln's log routed to the application (compiling the
  // model above logs what it does at info level), and the device memory
  // the models hold.
  int messages = 0;
  kiln::set_log_handler([&](kiln::LogLevel, const std::string&) { ++messages; }, kiln::LogLevel::info);
  kiln::CompiledModel compiled = kiln::compile(model);
  compiled({kiln::Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  kiln::set_log_handler({});
  std::printf("log handler: %s\n", messages > 0 ? "got messages" : "got nothing");
  std::uint64_t device_bytes = 0;
  for (const kiln::DeviceMemoryUse& use : kiln::device_memory_use()) device_bytes += use.bytes;
  std::printf("device memory in use: %s\n", device_bytes > 0 ? "some" : "none");

  report("unknown model", [] { kiln::models::build("no_such_model"); });
  report("wrong input shape", [&] { eager({kiln::Tensor::from_f32({3}, {1, 2, 3})}); });
}
