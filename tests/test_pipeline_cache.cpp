#define BOOST_TEST_MODULE pipeline_cache
#include <boost/test/unit_test.hpp>

// The driver's pipeline cache kept in kiln's cache folder
// (<cache dir>/pipelines/): the Vulkan header checks, what the driver hands
// back and takes again, the file the runtime writes after loading kernels,
// and damaged files (a flipped byte, a truncated file, another device's
// data), each refused with a warning, removed and written anew. Vulkan
// validation is fatal here.

#include "backends/vulkan/device.h"
#include "backends/vulkan/pipeline_cache.h"
#include "src/base/log.h"
#include "src/cache/cache_entry.h"
#include "src/runtime/device_pool.h"
#include "src/runtime/forwarding_device.h"

#include <kiln/kiln.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace kb = kiln::backend;
namespace kv = kiln::backend::vulkan;
namespace rt = kiln::runtime;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("kiln-test-" + name + "-" + std::to_string(std::random_device{}()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  if (fs::exists(dir))
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  return names;
}

// Collects the warnings logged while it lives.
class WarningLog {
 public:
  WarningLog() {
    previous_ = kiln::base::set_log_sink([this](kiln::base::LogLevel level, const std::string& message) {
      if (level == kiln::base::LogLevel::warning) messages_.push_back(message);
    });
  }
  ~WarningLog() { kiln::base::set_log_sink(previous_); }
  int count_containing(const std::string& part) const {
    int n = 0;
    for (const std::string& m : messages_) n += contains(m, part) ? 1 : 0;
    return n;
  }
  std::string all() const {
    std::string text;
    for (const std::string& m : messages_) text += m + "\n";
    return text;
  }

 private:
  kiln::base::LogSink previous_;
  std::vector<std::string> messages_;
};

// The pooled device is wrapped (memory accounting): the Vulkan device under it.
kv::VulkanDevice& vulkan(rt::DeviceContext& ctx) {
  return dynamic_cast<kv::VulkanDevice&>(rt::backend_device(*ctx.device));
}

// A small compute kernel; `scale` makes distinct binaries.
kb::KernelSource kernel_source(int scale) {
  kb::KernelSource source;
  source.name = "scale" + std::to_string(scale);
  source.language = "glsl";
  source.text = "#version 450\nlayout(local_size_x = 64) in;\n"
                "layout(std430, set = 0, binding = 0) buffer B0 { float data[]; } b0;\n"
                "void main() { b0.data[gl_GlobalInvocationID.x] *= " +
                std::to_string(scale) + ".0; }\n";
  source.workgroup_size = 64;
  source.num_buffers = 1;
  return source;
}

// Loads (and so creates the pipeline of) a new kernel on the device.
void load_kernel(rt::DeviceContext& ctx, int scale) {
  const kb::KernelSource source = kernel_source(scale);
  ctx.device->load_kernel(source, ctx.backend->compiler().compile(source, ctx.device->target()));
}

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

// A device whose pipeline cache lives in `dir`, the file written after loading a kernel.
std::shared_ptr<rt::DeviceContext> device_with_saved_cache(const fs::path& dir) {
  auto ctx = rt::acquire_device("vulkan", "", dir.string());
  load_kernel(*ctx, 2);
  rt::save_pipeline_cache(*ctx);
  BOOST_TEST_REQUIRE(fs::is_regular_file(ctx->pipeline_cache_file));
  return ctx;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_driver_hands_back_data_with_this_devices_header) {
  auto ctx = rt::acquire_device("vulkan", "", "off");
  kv::VulkanDevice& device = vulkan(*ctx);
  const kv::PhysicalDevice& physical = device.context().physical();
  BOOST_TEST(ctx->pipeline_cache_file.empty());  // "off": no file
  BOOST_TEST(!device.pipeline_cache_data().has_value());  // no pipeline yet

  load_kernel(*ctx, 3);
  const std::optional<std::vector<std::byte>> data = device.pipeline_cache_data();
  BOOST_TEST_REQUIRE(data.has_value());
  BOOST_TEST(kv::check_pipeline_cache_header(*data, physical) == "");
  BOOST_TEST_MESSAGE("the driver's pipeline cache after one pipeline: " << data->size() << " bytes");
  BOOST_TEST(!device.pipeline_cache_data().has_value());  // nothing new since
  load_kernel(*ctx, 3);                                    // the same binary: no new pipeline
  BOOST_TEST(!device.pipeline_cache_data().has_value());

  const std::string name = device.pipeline_cache_name().value_or("");
  char vendor[16];
  std::snprintf(vendor, sizeof vendor, "%x", physical.vendor_id);
  BOOST_TEST(name.starts_with("vulkan-" + std::string(vendor) + "-"));
  BOOST_TEST(name.size() > 2 * VK_UUID_SIZE);
  BOOST_TEST(name.find_first_not_of("vulkan-0123456789abcdef") == std::string::npos);  // a plain file name
}

BOOST_AUTO_TEST_CASE(the_header_check_refuses_each_mismatch) {
  auto ctx = rt::acquire_device("vulkan", "", "off");
  kv::VulkanDevice& device = vulkan(*ctx);
  const kv::PhysicalDevice& physical = device.context().physical();
  const std::vector<std::byte> good = device.pipeline_cache_contents();
  BOOST_TEST_REQUIRE(kv::check_pipeline_cache_header(good, physical) == "");

  auto with_u32 = [&](std::size_t offset, std::uint32_t value) {
    std::vector<std::byte> bad = good;
    std::memcpy(bad.data() + offset, &value, sizeof value);
    return kv::check_pipeline_cache_header(bad, physical);
  };
  auto header_word = [&](std::size_t offset) {
    std::uint32_t v = 0;
    std::memcpy(&v, good.data() + offset, sizeof v);
    return v;
  };
  BOOST_TEST(contains(kv::check_pipeline_cache_header(std::span(good).first(31), physical), "shorter than"));
  BOOST_TEST(contains(with_u32(0, 16), "header size 16"));
  BOOST_TEST(contains(with_u32(0, static_cast<std::uint32_t>(good.size()) + 1), "header size"));
  BOOST_TEST(contains(with_u32(4, 2), "header version 2"));
  BOOST_TEST(contains(with_u32(8, header_word(8) + 1), "vendor"));
  BOOST_TEST(contains(with_u32(12, header_word(12) + 1), "device"));
  std::vector<std::byte> other_uuid = good;
  other_uuid[16 + 5] ^= std::byte{0x40};
  BOOST_TEST(contains(kv::check_pipeline_cache_header(other_uuid, physical), "pipeline cache UUID"));

  // The device refuses such data and keeps working with its own cache.
  BOOST_TEST(contains(device.restore_pipeline_cache(other_uuid), "pipeline cache UUID"));
  BOOST_TEST(device.restore_pipeline_cache(good) == "");
  load_kernel(*ctx, 5);
  BOOST_TEST(kv::check_pipeline_cache_header(device.pipeline_cache_contents(), physical) == "");
}

BOOST_AUTO_TEST_CASE(the_file_appears_after_loading_kernels_and_a_second_device_reads_it) {
  const fs::path dir = fresh_dir("pipelines");
  std::string payload;
  {
    WarningLog warnings;
    auto ctx = rt::acquire_device("vulkan", "", dir.string());
    const std::string name = ctx->device->pipeline_cache_name().value_or("?");
    BOOST_TEST(ctx->pipeline_cache_file == dir / "pipelines" / (name + ".bin"));
    BOOST_TEST(!fs::exists(ctx->pipeline_cache_file));  // nothing saved yet
    BOOST_TEST(ctx->pipeline_cache_restored_bytes == 0u);
    rt::save_pipeline_cache(*ctx);                        // no pipeline: no file
    BOOST_TEST(!fs::exists(ctx->pipeline_cache_file));

    load_kernel(*ctx, 2);
    rt::save_pipeline_cache(*ctx);
    const kiln::cache::CacheEntryRead read = rt::read_pipeline_cache(*ctx);
    BOOST_TEST_REQUIRE(read.payload.has_value(), read.problem);
    payload = *read.payload;
    BOOST_TEST(kv::check_pipeline_cache_header(as_bytes(payload), vulkan(*ctx).context().physical()) == "");
    BOOST_TEST(warnings.all() == "");
  }
  // The first device is gone (the pool holds weak references): a new one reads the file.
  WarningLog warnings;
  auto second = rt::acquire_device("vulkan", "", dir.string());
  BOOST_TEST(second->pipeline_cache_restored_bytes == payload.size());
  const std::vector<std::byte> driver_holds = vulkan(*second).pipeline_cache_contents();
  BOOST_TEST(driver_holds.size() >= payload.size());  // it keeps what it was given
  BOOST_TEST(warnings.all() == "");
  BOOST_TEST(files_in(dir / "pipelines") == std::vector<std::string>{second->pipeline_cache_file.filename()});
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(compiling_a_model_writes_the_file) {
  const fs::path dir = fresh_dir("pipelines-model");
  kiln::Builder b("scaled");
  auto x = b.input("x", kiln::DType::f32, {4, 8});
  auto model = b.build({b.relu(b.mul(x, x))});
  {
    kiln::CompiledModel compiled = kiln::compile(model, {.backend = "vulkan", .cache_dir = dir.string()});
    compiled.prepare();
  }
  const std::vector<std::string> files = files_in(dir / "pipelines");
  BOOST_TEST_REQUIRE(files.size() == 1u);
  BOOST_TEST(files[0].starts_with("vulkan-"));
  BOOST_TEST(files[0].ends_with(".bin"));
  fs::remove_all(dir);
}

// Each damaged file: a warning naming the problem, the file removed before
// the driver sees it, a new valid file after the next pipeline, no temporary left.
BOOST_AUTO_TEST_CASE(damaged_files_are_refused_with_a_warning_and_replaced) {
  struct Damage {
    std::string what;
    std::string warning;
    std::function<void(rt::DeviceContext&)> apply;
  };
  const std::vector<Damage> damages = {
      {"a flipped byte", "checksum mismatch",
       [](rt::DeviceContext& ctx) {
         std::string bytes = read_bytes(ctx.pipeline_cache_file);
         bytes[bytes.size() / 2] ^= 0x10;
         write_bytes(ctx.pipeline_cache_file, bytes);
       }},
      {"a truncated file", "truncated",
       [](rt::DeviceContext& ctx) {
         const std::string bytes = read_bytes(ctx.pipeline_cache_file);
         write_bytes(ctx.pipeline_cache_file, bytes.substr(0, bytes.size() - 12));
       }},
      {"another device's data", "pipeline cache UUID",
       [](rt::DeviceContext& ctx) {
         // A well-formed entry under this device's name and key whose Vulkan
         // header names another driver's cache: only the header check catches it.
         std::vector<std::byte> data = vulkan(ctx).pipeline_cache_contents();
         data[16] ^= std::byte{0xff};
         BOOST_TEST_REQUIRE(rt::write_pipeline_cache(ctx, data) == "");
       }},
  };
  for (const Damage& damage : damages) {
    BOOST_TEST_CONTEXT(damage.what) {
      const fs::path dir = fresh_dir("pipelines-damaged");
      fs::path file;
      {
        auto ctx = device_with_saved_cache(dir);
        file = ctx->pipeline_cache_file;
        damage.apply(*ctx);
      }
      WarningLog warnings;
      auto ctx = rt::acquire_device("vulkan", "", dir.string());
      BOOST_TEST(warnings.count_containing("pipeline cache " + file.string() + " not used") == 1, warnings.all());
      BOOST_TEST(warnings.count_containing(damage.warning) == 1, warnings.all());
      BOOST_TEST(ctx->pipeline_cache_restored_bytes == 0u);
      BOOST_TEST(!fs::exists(file));  // removed, not left for the next process

      load_kernel(*ctx, 7);
      rt::save_pipeline_cache(*ctx);
      const kiln::cache::CacheEntryRead read = rt::read_pipeline_cache(*ctx);
      BOOST_TEST_REQUIRE(read.payload.has_value(), read.problem);
      BOOST_TEST(kv::check_pipeline_cache_header(as_bytes(*read.payload), vulkan(*ctx).context().physical()) == "");
      BOOST_TEST(files_in(dir / "pipelines") == std::vector<std::string>{file.filename()});  // no temporary files
      fs::remove_all(dir);
    }
  }
}
