#define BOOST_TEST_MODULE vulkan_device
#include <boost/test/unit_test.hpp>

// What is Vulkan's own on the machine's Vulkan device (lavapipe on CI):
// device discovery and limits, the offline SPIR-V target, GLSL texel
// buffers, the staging path of discrete GPUs, the pipeline cache, shaderc's
// errors, allocation limits, and proof that the validation layer really
// reports. The device checks every backend must pass (dispatch chains,
// timestamps, recording errors, ...) are the backend_conformance kit's.
// meson test runs this with KILN_VULKAN_VALIDATION=fatal, so any validation
// message fails it.

#include "backends/vulkan/buffer.h"
#include "backends/vulkan/device.h"
#include "backends/vulkan/instance.h"
#include "backends/vulkan/physical_device.h"
#include "backends/vulkan/vulkan_backend.h"
#include "src/kernel/ir.h"
#include "src/runtime/kernel_cache.h"

#include <kiln/error.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace kb = kiln::backend;
namespace kv = kiln::backend::vulkan;
using kiln::Error;
using kiln::ErrorKind;

namespace {

const kb::Backend& vulkan_backend() {
  static const std::unique_ptr<kb::Backend> backend = kb::create_vulkan_backend();
  return *backend;
}

// One device for the whole suite; the tests need one (no silent skip).
kb::Device& device() {
  static const std::shared_ptr<kb::Device> shared = [] {
    const auto reason = vulkan_backend().unavailable_reason();
    BOOST_TEST_REQUIRE(!reason.has_value(), "Vulkan is unavailable: " << reason.value_or(""));
    return vulkan_backend().create_device(0);
  }();
  return *shared;
}

kv::VulkanDevice& vulkan_device() { return dynamic_cast<kv::VulkanDevice&>(device()); }

bool has_error(const Error& error, ErrorKind kind, const std::string& text) {
  const std::string message = error.what();
  if (error.kind() != kind || message.find(text) == std::string::npos) {
    BOOST_TEST_MESSAGE("unexpected error (" << kiln::error_kind_name(error.kind()) << "): " << message);
    return false;
  }
  return true;
}

// A compute shader following kiln's binding convention: buffer i at binding i
// of set 0, a literal workgroup size, the linear index over a 2-D grid and a
// tail guard. `body` sees `i` (uint) and buffers b0..b{n-1} as float arrays.
kb::KernelSource glsl_kernel(const std::string& name, std::uint32_t num_buffers, std::uint32_t count,
                             const std::string& body, std::uint32_t workgroup_size = 64) {
  std::string text = "#version 450\nlayout(local_size_x = " + std::to_string(workgroup_size) + ") in;\n";
  for (std::uint32_t b = 0; b < num_buffers; ++b)
    text += "layout(std430, set = 0, binding = " + std::to_string(b) + ") buffer B" + std::to_string(b) +
            " { float data[]; } b" + std::to_string(b) + ";\n";
  text += "void main() {\n"
          "  uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * " +
          std::to_string(workgroup_size) + "u);\n  if (i >= " + std::to_string(count) + "u) return;\n  " + body +
          "\n}\n";
  kb::KernelSource source;
  source.name = name;
  source.language = "glsl";
  source.text = text;
  source.workgroup_size = workgroup_size;
  source.num_buffers = num_buffers;
  return source;
}

std::shared_ptr<kb::LoadedKernel> load(kb::Device& dev, const kb::KernelSource& source) {
  return dev.load_kernel(source, vulkan_backend().compiler().compile(source, dev.target()));
}

std::array<std::uint32_t, 3> groups_for(std::uint32_t count, std::uint32_t workgroup_size = 64) {
  return {(count + workgroup_size - 1) / workgroup_size, 1, 1};
}

std::span<const std::byte> bytes_of(const std::vector<float>& values) { return std::as_bytes(std::span(values)); }

std::vector<float> download_floats(kb::Device& dev, const kb::Buffer& buffer, std::uint64_t offset,
                                   std::size_t count) {
  std::vector<float> values(count);
  dev.download(buffer, offset, std::as_writable_bytes(std::span(values)));
  return values;
}

std::vector<float> iota_floats(std::size_t count, float start) {
  std::vector<float> values(count);
  std::iota(values.begin(), values.end(), start);
  return values;
}

kb::BufferBinding whole(const std::shared_ptr<kb::Buffer>& buffer) { return {buffer.get(), 0, buffer->size()}; }

std::uint64_t aligned(std::uint64_t bytes) {
  const std::uint64_t alignment = device().target().min_buffer_offset_alignment;
  return (bytes + alignment - 1) / alignment * alignment;
}

void check_round_trip_with_offsets(kb::Device& dev, std::size_t count) {
  const std::vector<float> first = iota_floats(count, 1.0f);
  auto buffer = dev.allocate(count * sizeof(float));
  BOOST_TEST(buffer->size() == count * sizeof(float));
  dev.upload(*buffer, 0, bytes_of(first));
  const std::vector<float> patch = iota_floats(10, -100.0f);
  const std::uint64_t patch_offset = 37 * sizeof(float);
  dev.upload(*buffer, patch_offset, bytes_of(patch));

  std::vector<float> expected = first;
  std::copy(patch.begin(), patch.end(), expected.begin() + 37);
  BOOST_TEST(download_floats(dev, *buffer, 0, count) == expected, boost::test_tools::per_element());
  const std::vector<float> middle = download_floats(dev, *buffer, 30 * sizeof(float), 20);
  BOOST_TEST(middle == std::vector<float>(expected.begin() + 30, expected.begin() + 50),
             boost::test_tools::per_element());

  BOOST_CHECK_EXCEPTION(dev.upload(*buffer, (count - 2) * sizeof(float), bytes_of(patch)), Error,
                        [](const Error& e) { return has_error(e, ErrorKind::InvalidArgument, "exceeds"); });
  std::vector<std::byte> too_much(8);
  BOOST_CHECK_EXCEPTION(dev.download(*buffer, count * sizeof(float) - 4, too_much), Error,
                        [](const Error& e) { return has_error(e, ErrorKind::InvalidArgument, "exceeds"); });
}

}  // namespace

BOOST_AUTO_TEST_CASE(meson_runs_with_fatal_validation) {
  const char* mode = std::getenv("KILN_VULKAN_VALIDATION");
  if (mode != nullptr && std::string(mode) == "fatal")
    BOOST_TEST((kv::Instance::shared()->validation() == kv::ValidationMode::fatal));
  BOOST_TEST(vulkan_backend().name() == "vulkan");
}

BOOST_AUTO_TEST_CASE(enumeration_finds_lavapipe_with_sane_limits) {
  const std::vector<kb::DeviceInfo> devices = vulkan_backend().enumerate_devices();
  BOOST_TEST_REQUIRE(!devices.empty());
  const kb::TargetDesc* lavapipe = nullptr;
  for (const kb::DeviceInfo& info : devices) {
    BOOST_TEST_MESSAGE("device " << info.index << ": " << info.target.device_name << ", " << info.target.driver);
    if (info.target.device_name.find("llvmpipe") != std::string::npos) lavapipe = &info.target;
  }
  BOOST_TEST_REQUIRE(lavapipe != nullptr, "no llvmpipe (lavapipe) device among the Vulkan devices");
  const kb::TargetDesc& t = *lavapipe;
  BOOST_TEST(t.backend == "vulkan");
  BOOST_TEST(t.device_type == "cpu");
  BOOST_TEST(t.cpu_cores);  // lavapipe: the CPU variants of passes and kernels
  BOOST_TEST(t.arch == "spirv1.3");
  BOOST_TEST(t.api_version.rfind("Vulkan 1.", 0) == 0);
  BOOST_TEST(t.driver.find("llvmpipe") != std::string::npos);
  BOOST_TEST(t.driver.find("Mesa") != std::string::npos);
  BOOST_TEST(t.subgroup_size >= 4u);
  BOOST_TEST(std::has_single_bit(t.subgroup_size));
  BOOST_TEST(t.max_workgroup_invocations >= 128u);
  BOOST_TEST(t.max_workgroup_size[0] >= 128u);
  BOOST_TEST(t.max_workgroup_count[0] >= 65535u);
  BOOST_TEST(t.max_shared_memory_bytes >= 16384u);
  BOOST_TEST(t.max_buffer_bytes >= (1u << 27));
  BOOST_TEST(t.device_memory_bytes >= t.max_buffer_bytes);
  BOOST_TEST(std::has_single_bit(t.min_buffer_offset_alignment));
  BOOST_TEST(t.max_kernel_buffers >= 4u);
  // Subgroup broadcasts in compute, without a width (sizes must match), and
  // both float texel-buffer formats at least as large as Vulkan's minimum.
  BOOST_TEST(t.subgroup_basic);
  BOOST_TEST(t.subgroup_broadcast);
  BOOST_TEST(!t.subgroup_partitions);
  BOOST_TEST(t.texel_r32f);
  BOOST_TEST(t.texel_rgba32f);
  BOOST_TEST(t.max_texel_buffer_elements >= 65536u);
  BOOST_TEST(t.texel_16bit);  // R16 / RGBA16 uniform texel buffers are mandatory formats
  BOOST_TEST(t.int64);
  BOOST_TEST(t.timestamps);

  // The device made from index 0 reports the same target as the enumeration.
  BOOST_TEST(device().target().fingerprint() == devices.front().target.fingerprint());
  BOOST_TEST(t.fingerprint().find(t.device_name) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(offline_target_and_supports) {
  const std::vector<kb::TargetDesc> offline = vulkan_backend().offline_targets();
  BOOST_TEST_REQUIRE(offline.size() == 1u);
  const kb::TargetDesc& generic = offline.front();
  BOOST_TEST(generic.arch == "spirv1.3");
  BOOST_TEST(generic.device_type == "offline");
  BOOST_TEST(generic.offline);
  BOOST_TEST(generic.fingerprint() != device().target().fingerprint());

  kb::KernelRequirements kernel;
  kernel.kernel_name = "relu_0";
  kernel.workgroup_size = 64;
  kernel.num_buffers = 2;
  BOOST_TEST(!vulkan_backend().supports(kernel, generic).has_value());

  kernel.workgroup_size = 256;  // the generic target guarantees 128
  const auto too_wide = vulkan_backend().supports(kernel, generic);
  BOOST_TEST_REQUIRE(too_wide.has_value());
  BOOST_TEST(too_wide->find("relu_0") != std::string::npos);
  BOOST_TEST(too_wide->find("256") != std::string::npos);
  BOOST_TEST(!vulkan_backend().supports(kernel, device().target()).has_value());

  kernel.workgroup_size = 64;
  kernel.shared_memory_bytes = device().target().max_shared_memory_bytes + 1;
  BOOST_TEST(vulkan_backend().supports(kernel, device().target()).has_value());
  kernel.shared_memory_bytes = 0;
  kernel.num_buffers = generic.max_kernel_buffers + 1;
  BOOST_TEST(vulkan_backend().supports(kernel, generic).has_value());
  kernel.num_buffers = 2;
  kernel.fp16 = true;
  BOOST_TEST(vulkan_backend().supports(kernel, generic).has_value());
  kernel.fp16 = false;

  // Subgroup broadcasts: the device's own size only; the generic target
  // promises no subgroup operations. Texel buffers likewise.
  const kb::TargetDesc& here = device().target();
  kernel.subgroup_size = here.subgroup_size;
  kernel.subgroup_broadcast = true;
  kernel.texel_width_1 = kernel.texel_width_4 = true;
  BOOST_TEST(!vulkan_backend().supports(kernel, here).has_value());
  const auto generic_refuses = vulkan_backend().supports(kernel, generic);
  BOOST_TEST_REQUIRE(generic_refuses.has_value());
  BOOST_TEST(generic_refuses->find("subgroup broadcasts") != std::string::npos, *generic_refuses);
  kernel.subgroup_size = here.subgroup_size * 2;
  const auto wrong_size = vulkan_backend().supports(kernel, here);
  BOOST_TEST_REQUIRE(wrong_size.has_value());
  BOOST_TEST(wrong_size->find("written for subgroups of " + std::to_string(here.subgroup_size * 2) + " lanes") !=
                 std::string::npos,
             *wrong_size);
  kernel.subgroup_size = 0;
  kernel.subgroup_broadcast = false;
  const auto no_texels = vulkan_backend().supports(kernel, generic);
  BOOST_TEST_REQUIRE(no_texels.has_value());
  BOOST_TEST(no_texels->find("RGBA32 float texel buffers") != std::string::npos, *no_texels);
  kernel.texel_width_1 = kernel.texel_width_4 = false;
  kernel.texel_16bit = true;
  BOOST_TEST(!vulkan_backend().supports(kernel, here).has_value());
  kb::TargetDesc no_16bit_texels = here;
  no_16bit_texels.texel_16bit = false;
  const auto refused = vulkan_backend().supports(kernel, no_16bit_texels);
  BOOST_TEST_REQUIRE(refused.has_value());
  BOOST_TEST(refused->find("16-bit (R16 / RGBA16) texel buffers") != std::string::npos, *refused);
}

// A uniform texel buffer read twice through views at non-zero offsets of one
// buffer (RGBA32 and R32), in a list replayed twice, with the same binding
// in two dispatches (one view) and a binding that ends mid-texel.
BOOST_AUTO_TEST_CASE(texel_buffers_bind_at_offsets) {
  kb::Device& dev = device();
  const std::uint32_t count = 100;
  kb::KernelSource source;
  source.name = "texel_sum";
  source.language = "glsl";
  source.workgroup_size = 64;
  source.num_buffers = 3;
  source.texel_widths = {4, 1, 0};
  source.text =
      "#version 450\nlayout(local_size_x = 64) in;\n"
      "layout(set = 0, binding = 0) uniform samplerBuffer t4;\n"
      "layout(set = 0, binding = 1) uniform samplerBuffer t1;\n"
      "layout(std430, set = 0, binding = 2) buffer B2 { float data[]; } y;\n"
      "void main() {\n  uint i = gl_GlobalInvocationID.x;\n  if (i >= " + std::to_string(count) + "u) return;\n"
      "  vec4 q = texelFetch(t4, int(i));\n"
      "  y.data[i] += q.x + 10.0 * q.w + 100.0 * texelFetch(t1, int(i)).x;\n}\n";
  auto kernel = load(dev, source);

  const std::vector<float> values = iota_floats(4 * count + 3, 0.0f);
  const std::uint64_t first = aligned(12), second = aligned(first + 4 * count * sizeof(float));
  auto inputs = dev.allocate(second + values.size() * sizeof(float));
  dev.upload(*inputs, first, bytes_of(values));
  dev.upload(*inputs, second, bytes_of(values));
  auto output = dev.allocate(count * sizeof(float));
  dev.upload(*output, 0, bytes_of(std::vector<float>(count, 0.0f)));
  // Texels from `first`; scalars from `second`, its range ending inside a texel.
  const kb::BufferBinding bindings[] = {{inputs.get(), first, 4 * count * sizeof(float)},
                                        {inputs.get(), second, values.size() * sizeof(float)},
                                        whole(output)};
  auto list = dev.create_command_list();
  list->dispatch(*kernel, groups_for(count), bindings);
  list->dispatch(*kernel, groups_for(count), bindings);
  list->finish();
  list->submit();
  list->submit();

  std::vector<float> expected(count);
  for (std::uint32_t i = 0; i < count; ++i) expected[i] = 4.0f * (4.0f * i + 10.0f * (4.0f * i + 3.0f) + 100.0f * i);
  BOOST_TEST(download_floats(dev, *output, 0, count) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(buffer_round_trip_with_offsets) {
  check_round_trip_with_offsets(device(), 256);
  auto empty = device().allocate(0);
  BOOST_TEST(empty->size() == 0u);
  device().upload(*empty, 0, {});
}

BOOST_AUTO_TEST_CASE(buffer_round_trip_through_staging) {
  // The discrete-GPU path: device memory is never mapped.
  const auto instance = kv::Instance::shared();
  kv::VulkanDevice staged(instance, kv::query_physical_devices(*instance).at(0), 0,
                          kv::DeviceOptions{.map_device_memory = false});
  check_round_trip_with_offsets(staged, 256);
  auto probe = staged.allocate(64);
  BOOST_TEST(dynamic_cast<kv::VulkanBuffer&>(*probe).mapped() == nullptr);

  // Larger than one staging chunk (32 MiB).
  const std::size_t count = (40u << 20) / sizeof(float);
  const std::vector<float> big = iota_floats(count, 0.0f);
  auto buffer = staged.allocate(count * sizeof(float));
  staged.upload(*buffer, 0, bytes_of(big));
  const std::vector<float> back = download_floats(staged, *buffer, 0, count);
  BOOST_TEST((back == big));
}

BOOST_AUTO_TEST_CASE(replay_accumulates_and_kernel_cache_is_shared) {
  kb::Device& dev = device();
  const std::uint32_t count = 300;
  const kb::KernelSource source = glsl_kernel("accumulate", 2, count, "b0.data[i] += b1.data[i];");
  const kb::KernelBinary binary = vulkan_backend().compiler().compile(source, dev.target());
  BOOST_TEST(binary.format == "spirv");
  const std::size_t pipelines_before = vulkan_device().pipeline_count();
  auto kernel = dev.load_kernel(source, binary);
  BOOST_TEST(dev.load_kernel(source, binary) == kernel);
  kb::KernelSource renamed = source;
  renamed.name = "accumulate_again";
  BOOST_TEST(dev.load_kernel(renamed, binary)->name() == "accumulate_again");
  BOOST_TEST(vulkan_device().pipeline_count() == pipelines_before + 1);

  const std::vector<float> step = iota_floats(count, 1.0f);
  auto accumulator = dev.allocate(count * sizeof(float));
  auto increment = dev.allocate(count * sizeof(float));
  dev.upload(*accumulator, 0, bytes_of(std::vector<float>(count, 10.0f)));
  dev.upload(*increment, 0, bytes_of(step));

  auto list = dev.create_command_list();
  const kb::BufferBinding bindings[] = {whole(accumulator), whole(increment)};
  list->dispatch(*kernel, groups_for(count), bindings);
  BOOST_CHECK_EXCEPTION(list->submit(), Error,
                        [](const Error& e) { return has_error(e, ErrorKind::InvalidArgument, "before finish"); });
  list->finish();
  for (int replay = 0; replay < 5; ++replay) list->submit();

  std::vector<float> expected(count);
  for (std::uint32_t i = 0; i < count; ++i) expected[i] = 10.0f + 5.0f * step[i];
  BOOST_TEST(download_floats(dev, *accumulator, 0, count) == expected, boost::test_tools::per_element());

  BOOST_CHECK_EXCEPTION(list->dispatch(*kernel, groups_for(count), bindings), Error,
                        [](const Error& e) { return has_error(e, ErrorKind::InvalidArgument, "after finish"); });
  BOOST_CHECK_EXCEPTION(list->finish(), Error,
                        [](const Error& e) { return has_error(e, ErrorKind::InvalidArgument, "twice"); });
}

BOOST_AUTO_TEST_CASE(compiler_errors_carry_the_log) {
  const kb::KernelCompiler& compiler = vulkan_backend().compiler();
  const std::string version = compiler.version();
  BOOST_TEST(version.find("shaderc") != std::string::npos);
  BOOST_TEST(version.find("SPIRV-Tools") != std::string::npos);

  const kb::KernelSource bad = glsl_kernel("broken_kernel", 1, 16, "b0.data[i] = not_declared_anywhere;");
  BOOST_CHECK_EXCEPTION(compiler.compile(bad, device().target()), Error, [](const Error& e) {
    const std::string message = e.what();
    return has_error(e, ErrorKind::Internal, "not_declared_anywhere") &&
           message.find("undeclared identifier") != std::string::npos &&
           message.find("broken_kernel") != std::string::npos && message.find("   1 | #version 450") != std::string::npos;
  });

  kb::KernelSource cuda = glsl_kernel("ok", 1, 16, "b0.data[i] = 1.0;");
  cuda.language = "cuda";
  BOOST_CHECK_EXCEPTION(compiler.compile(cuda, device().target()), Error,
                        [](const Error& e) { return has_error(e, ErrorKind::InvalidArgument, "GLSL"); });
  kb::TargetDesc sm90 = device().target();
  sm90.arch = "sm_90";
  BOOST_CHECK_EXCEPTION(compiler.compile(glsl_kernel("ok", 1, 16, "b0.data[i] = 1.0;"), sm90), Error,
                        [](const Error& e) { return has_error(e, ErrorKind::InvalidArgument, "sm_90"); });
}

BOOST_AUTO_TEST_CASE(allocation_limits_are_out_of_memory) {
  BOOST_CHECK_EXCEPTION(device().allocate(1ull << 50), Error, [](const Error& e) {
    return has_error(e, ErrorKind::OutOfMemory, "Vulkan device 0") && has_error(e, ErrorKind::OutOfMemory, "1125899906842624 bytes");
  });
  BOOST_CHECK_EXCEPTION(device().allocate(device().target().max_buffer_bytes + 1), Error,
                        [](const Error& e) { return has_error(e, ErrorKind::OutOfMemory, "maxStorageBufferRange"); });
}

namespace {

// A deliberately invalid call: a buffer with no usage flags.
void create_buffer_without_usage(const kv::DeviceContext& context) {
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = 64;
  info.usage = 0;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (context.vk().vkCreateBuffer(context.handle(), &info, nullptr, &buffer) == VK_SUCCESS)
    context.vk().vkDestroyBuffer(context.handle(), buffer, nullptr);
}

bool any_contains(const std::vector<std::string>& messages, const std::string& text) {
  for (const std::string& message : messages)
    if (message.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(validation_layer_reports_invalid_usage_and_hazards) {
  const auto instance = std::make_shared<kv::Instance>(kv::ValidationMode::collect);
  kv::VulkanDevice dev(instance, kv::query_physical_devices(*instance).at(0), 0);
  const kv::DeviceContext& context = dev.context();
  BOOST_TEST(instance->take_validation_messages().empty());

  // More than the layer's default limit of 10 reports per message: every one arrives.
  const int repeats = 12;
  for (int r = 0; r < repeats; ++r) create_buffer_without_usage(context);
  const std::vector<std::string> usage_messages = instance->take_validation_messages();
  const auto usage_reports = std::count_if(usage_messages.begin(), usage_messages.end(), [](const std::string& m) {
    return m.find("VUID-VkBufferCreateInfo-usage") != std::string::npos;
  });
  BOOST_TEST(usage_reports == repeats);

  // Two copies into one buffer with no barrier between them: a write-after-write
  // hazard that only synchronisation validation sees.
  auto source = dev.allocate(256);
  auto target = dev.allocate(256);
  const kv::DeviceFunctions& vk = context.vk();
  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.queueFamilyIndex = context.physical().compute_queue_family;
  VkCommandPool pool = VK_NULL_HANDLE;
  BOOST_TEST_REQUIRE(vk.vkCreateCommandPool(context.handle(), &pool_info, nullptr, &pool) == VK_SUCCESS);
  VkCommandBufferAllocateInfo allocate_info{};
  allocate_info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  allocate_info.commandPool = pool;
  allocate_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate_info.commandBufferCount = 1;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  BOOST_TEST_REQUIRE(vk.vkAllocateCommandBuffers(context.handle(), &allocate_info, &commands) == VK_SUCCESS);
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  vk.vkBeginCommandBuffer(commands, &begin);
  const VkBufferCopy region{0, 0, 256};
  const VkBuffer from = dynamic_cast<kv::VulkanBuffer&>(*source).handle();
  const VkBuffer to = dynamic_cast<kv::VulkanBuffer&>(*target).handle();
  vk.vkCmdCopyBuffer(commands, from, to, 1, &region);
  vk.vkCmdCopyBuffer(commands, from, to, 1, &region);
  vk.vkEndCommandBuffer(commands);
  vk.vkDestroyCommandPool(context.handle(), pool, nullptr);
  const std::vector<std::string> hazard_messages = instance->take_validation_messages();
  BOOST_TEST(any_contains(hazard_messages, "SYNC-HAZARD-WRITE-AFTER-WRITE"));
  for (const std::string& message : hazard_messages) BOOST_TEST_MESSAGE("collected: " << message.substr(0, 160));
}

BOOST_AUTO_TEST_CASE(fatal_mode_throws_on_the_next_call) {
  const auto instance = std::make_shared<kv::Instance>(kv::ValidationMode::fatal);
  kv::VulkanDevice dev(instance, kv::query_physical_devices(*instance).at(0), 0);
  auto buffer = dev.allocate(64);
  create_buffer_without_usage(dev.context());
  BOOST_CHECK_EXCEPTION(dev.allocate(64), Error, [](const Error& e) {
    return has_error(e, ErrorKind::Internal, "Vulkan validation:") &&
           has_error(e, ErrorKind::Internal, "VUID-VkBufferCreateInfo-usage");
  });
  // Raised messages are consumed: the device works again and closes cleanly.
  BOOST_TEST(!instance->has_validation_messages());
  BOOST_TEST(dev.allocate(64)->size() == 64u);
}

// ---- The kernel cache on this device -------------------------------------

namespace {

// y = x * factor over n elements, in the kernel IR.
kiln::kir::Kernel scale_kernel(double factor, std::int64_t n, std::uint32_t workgroup_size = 64) {
  namespace kir = kiln::kir;
  kir::Kernel kernel("scale");
  const kir::Buf x = kernel.add_buffer("x", kir::ScalarType::f32, kir::Access::read);
  const kir::Buf y = kernel.add_buffer("y", kir::ScalarType::f32, kir::Access::write);
  kernel.global_size = n;
  kernel.workgroup_size = workgroup_size;
  const kir::Expr i = kir::global_index();
  kernel.body.push_back(kir::store(y, i, kir::load(x, i, kir::ScalarType::f32) * kir::f32(factor)));
  return kernel;
}

}  // namespace

BOOST_AUTO_TEST_CASE(kernel_cache_loads_distinct_kernels_concurrently_and_once) {
  const std::shared_ptr<kb::Device> dev = vulkan_backend().create_device(0);
  kiln::runtime::KernelCache cache(vulkan_backend(), dev, kiln::cache::CompileCache("off"));
  const std::int64_t count = 200;
  const std::vector<double> factors = {2.0, 3.0, 2.0, 5.0, 3.0};
  std::vector<kiln::kir::Kernel> kernels;
  for (double factor : factors) kernels.push_back(scale_kernel(factor, count));
  std::vector<const kiln::kir::Kernel*> pointers;
  for (const auto& kernel : kernels) pointers.push_back(&kernel);

  const auto loaded = cache.get_all(pointers, 4);
  BOOST_TEST_REQUIRE(loaded.size() == factors.size());
  BOOST_TEST(cache.compiled() == 3);  // one compile per distinct source
  BOOST_TEST(cache.distinct_kernels() == 3);
  BOOST_TEST(loaded[0] == loaded[2]);
  BOOST_TEST(loaded[1] == loaded[4]);
  BOOST_TEST(loaded[0] != loaded[1]);
  BOOST_TEST(cache.get(kernels[3]) == loaded[3]);  // later lookups hit
  BOOST_TEST(cache.get_all(pointers).at(1) == loaded[1]);
  BOOST_TEST(cache.compiled() == 3);

  // Each kernel computes its own result on its first dispatch.
  const std::vector<float> x = iota_floats(static_cast<std::uint32_t>(count), 1.0f);
  auto input = dev->allocate(count * sizeof(float));
  dev->upload(*input, 0, bytes_of(x));
  for (std::size_t k = 0; k < factors.size(); ++k) {
    auto output = dev->allocate(count * sizeof(float));
    auto list = dev->create_command_list();
    const kb::BufferBinding bindings[] = {whole(input), whole(output)};
    list->dispatch(*loaded[k], kiln::kir::dispatch_grid(kernels[k], dev->target().max_workgroup_count[0]), bindings);
    list->finish();
    list->submit();
    std::vector<float> expected(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) expected[i] = static_cast<float>(x[i] * factors[k]);
    BOOST_TEST(download_floats(*dev, *output, 0, static_cast<std::uint32_t>(count)) == expected,
               boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(kernel_cache_reports_the_failing_kernel_after_loading_the_rest) {
  const std::shared_ptr<kb::Device> dev = vulkan_backend().create_device(0);
  kiln::runtime::KernelCache cache(vulkan_backend(), dev, kiln::cache::CompileCache("off"));
  const std::uint32_t too_wide = dev->target().max_workgroup_invocations * 2;
  const kiln::kir::Kernel fine = scale_kernel(7.0, 64);
  const kiln::kir::Kernel wide = scale_kernel(7.0, 64, too_wide);
  const kiln::kir::Kernel* pointers[] = {&fine, &wide};
  BOOST_CHECK_EXCEPTION(cache.get_all(pointers, 2), Error, [](const Error& e) {
    return has_error(e, ErrorKind::Unsupported, "kernel 'scale' cannot run on");
  });
  BOOST_TEST(cache.distinct_kernels() == 1);  // the other kernel loaded and stays cached
}

// Robust buffer access (docs/compiled-models.md, "Trust"): a kernel that
// writes past its binding (as a forged compiled-model file's could) writes
// nothing outside it; the rest of the buffer keeps its bytes. lavapipe
// checks bounds even without the feature, so here the first assertion (the
// device was created with it) is the one KILN_VULKAN_ROBUST_ACCESS=0 fails;
// on a GPU the second can fail too.
BOOST_AUTO_TEST_CASE(writes_past_a_binding_stay_inside_it) {
  BOOST_TEST(vulkan_device().context().robust_buffer_access());
  kb::Device& dev = device();
  const std::uint32_t bound = 64, written = 256;
  auto kernel = load(dev, glsl_kernel("write_past_binding", 1, written, "b0.data[i] = float(i);"));
  auto buffer = dev.allocate(written * sizeof(float));
  dev.upload(*buffer, 0, bytes_of(std::vector<float>(written, -1.0f)));
  const kb::BufferBinding bindings[] = {{buffer.get(), 0, bound * sizeof(float)}};
  auto list = dev.create_command_list();
  list->dispatch(*kernel, groups_for(written), bindings);
  list->finish();
  list->submit();
  const std::vector<float> after = download_floats(dev, *buffer, 0, written);
  BOOST_TEST(std::vector<float>(after.begin(), after.begin() + bound) == iota_floats(bound, 0.0f),
             boost::test_tools::per_element());
  BOOST_TEST(std::vector<float>(after.begin() + bound, after.end()) == std::vector<float>(written - bound, -1.0f),
             boost::test_tools::per_element());
}
