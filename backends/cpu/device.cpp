#include "backends/cpu/device.h"

#include "backends/cpu/workers.h"
#include "src/base/check.h"

#include <kiln/error.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

namespace kiln::backend::cpu {
namespace {

constexpr std::uint64_t kAlignment = 64;  // a cache line: bindings start on one

class HostBuffer final : public Buffer {
 public:
  HostBuffer(std::uint64_t bytes, const void* device) : bytes_(bytes), device_(device) {
    const std::uint64_t rounded = (std::max<std::uint64_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<std::byte*>(std::aligned_alloc(kAlignment, rounded));
    if (data_ == nullptr)
      throw_error(ErrorKind::OutOfMemory, "the cpu device cannot allocate " + std::to_string(bytes) + " bytes");
  }
  ~HostBuffer() override { std::free(data_); }
  std::uint64_t size() const override { return bytes_; }
  std::byte* data() const { return data_; }
  const void* device() const { return device_; }

 private:
  std::uint64_t bytes_;
  const void* device_;
  std::byte* data_ = nullptr;
};

// A kernel's shared object, loaded with dlopen; unloaded with the last
// reference.
class HostKernel final : public LoadedKernel {
 public:
  HostKernel(const KernelSource& source, const KernelBinary& binary) : name_(source.name) {
    KILN_CHECK(binary.format == "elf-so", ErrorKind::InvalidArgument,
               "the cpu device cannot load a '" + binary.format + "' binary (kernel '" + name_ + "')");
    // dlopen knows a library by its path and hands back one already loaded
    // under the same path (also one dlclose kept), so every load gets a path
    // of its own: a file created for it alone, removed once mapped.
    static std::atomic<std::uint64_t> loads{0};
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("kiln-kernel-" + std::to_string(getpid()) + "-" + std::to_string(loads++) + ".so"))
                                 .string();
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    KILN_CHECK(fd >= 0, ErrorKind::Internal,
               "the cpu device cannot write " + path + ": " + std::string(std::strerror(errno)));
    std::size_t written = 0;
    while (written < binary.data.size()) {
      const ssize_t n = write(fd, binary.data.data() + written, binary.data.size() - written);
      if (n <= 0) break;
      written += static_cast<std::size_t>(n);
    }
    close(fd);
    handle_ = written == binary.data.size() ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
    const char* why = handle_ == nullptr ? dlerror() : nullptr;
    unlink(path.c_str());
    KILN_CHECK(handle_ != nullptr, ErrorKind::Internal,
               "the cpu device cannot load kernel '" + name_ + "': " + (why ? why : "the binary was not written"));
    entry_.run_groups = reinterpret_cast<RunGroupsFn>(dlsym(handle_, "kiln_cpu_run_groups"));
    entry_.invoke = reinterpret_cast<InvokeFn>(dlsym(handle_, "kiln_cpu_invoke"));
    entry_.set_barrier = reinterpret_cast<SetBarrierFn>(dlsym(handle_, "kiln_cpu_set_barrier"));
    KILN_CHECK(entry_.run_groups && entry_.invoke && entry_.set_barrier, ErrorKind::Internal,
               "kernel '" + name_ + "' lacks the cpu backend's entry points");
    entry_.workgroup_size = source.workgroup_size;
    entry_.barriers = source.text.find("kiln_barrier_fn(kiln_barrier_ctx);") != std::string::npos;
    num_buffers_ = source.num_buffers;
    num_params_ = source.num_params;
  }
  ~HostKernel() override {
    if (handle_ != nullptr) dlclose(handle_);
  }
  const std::string& name() const override { return name_; }
  const KernelEntry& entry() const { return entry_; }
  std::uint32_t num_buffers() const { return num_buffers_; }
  std::uint32_t num_params() const { return num_params_; }

 private:
  std::string name_;
  void* handle_ = nullptr;
  KernelEntry entry_;
  std::uint32_t num_buffers_ = 0;
  std::uint32_t num_params_ = 0;
};

class HostCommandList final : public CommandList {
 public:
  HostCommandList(const TargetDesc& target, Workers& workers, const void* device)
      : target_(target), workers_(workers), device_(device) {}

  void dispatch(LoadedKernel& kernel, std::array<std::uint32_t, 3> groups, std::span<const BufferBinding> bindings,
                std::span<const std::int32_t> params) override {
    auto& k = dynamic_cast<HostKernel&>(kernel);
    KILN_CHECK(!finished_, ErrorKind::InvalidArgument, "a finished command list cannot record more");
    check_dispatch(k.name(), k.num_buffers(), k.num_params(), groups, bindings, params, target_, kAlignment);
    Dispatch d{&k, {groups[0], groups[1], groups[2]}, {}, {params.begin(), params.end()}};
    for (std::size_t i = 0; i < bindings.size(); ++i) {
      const HostBuffer& b = buffer_of(*bindings[i].buffer);
      d.buffers.push_back(b.data() + bindings[i].offset);
    }
    steps_.emplace_back(std::move(d));
  }

  void copy(const Buffer& src, std::uint64_t src_offset, Buffer& dst, std::uint64_t dst_offset,
            std::uint64_t bytes) override {
    KILN_CHECK(!finished_, ErrorKind::InvalidArgument, "a finished command list cannot record more");
    const HostBuffer& s = buffer_of(src);
    const HostBuffer& d = buffer_of(dst);
    KILN_CHECK(src_offset + bytes <= s.size() && dst_offset + bytes <= d.size(), ErrorKind::InvalidArgument,
               "a copy of " + std::to_string(bytes) + " bytes from offset " + std::to_string(src_offset) + " of " +
                   std::to_string(s.size()) + " to offset " + std::to_string(dst_offset) + " of " +
                   std::to_string(d.size()) + " would exceed a buffer");
    steps_.emplace_back(Copy{s.data() + src_offset, d.data() + dst_offset, bytes});
  }

  void finish() override {
    KILN_CHECK(!finished_, ErrorKind::InvalidArgument, "finish() called twice on a command list");
    finished_ = true;
  }

  void submit() override {
    KILN_CHECK(finished_, ErrorKind::InvalidArgument, "submit() before finish()");
    const auto start = std::chrono::steady_clock::now();
    for (const auto& step : steps_) {
      if (const auto* d = std::get_if<Dispatch>(&step))
        workers_.dispatch(d->kernel->entry(), d->groups, d->buffers, d->params);
      else if (const auto* c = std::get_if<Copy>(&step))
        std::memmove(c->dst, c->src, c->bytes);
    }
    last_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }

  std::optional<double> last_device_ms() const override { return last_ms_; }

 private:
  struct Dispatch {
    HostKernel* kernel;
    uvec3 groups;
    std::vector<void*> buffers;
    std::vector<std::int32_t> params;
  };
  struct Copy {
    const std::byte* src;
    std::byte* dst;
    std::uint64_t bytes;
  };

  const HostBuffer& buffer_of(const Buffer& buffer) const {
    const auto* b = dynamic_cast<const HostBuffer*>(&buffer);
    KILN_CHECK(b != nullptr && b->device() == device_, ErrorKind::InvalidArgument,
               "a buffer of another device was given to the cpu device");
    return *b;
  }

  const TargetDesc& target_;
  Workers& workers_;
  const void* device_;
  std::vector<std::variant<Dispatch, Copy>> steps_;
  bool finished_ = false;
  std::optional<double> last_ms_;
};

class HostDevice final : public Device {
 public:
  HostDevice(TargetDesc target, unsigned threads) : target_(std::move(target)), workers_(threads) {}

  const TargetDesc& target() const override { return target_; }

  std::shared_ptr<Buffer> allocate(std::uint64_t bytes) override {
    KILN_CHECK(bytes <= target_.max_buffer_bytes, ErrorKind::OutOfMemory,
               "the cpu device cannot allocate " + std::to_string(bytes) + " bytes: buffers hold at most " +
                   std::to_string(target_.max_buffer_bytes));
    return std::make_shared<HostBuffer>(bytes, this);
  }

  void upload(Buffer& buffer, std::uint64_t offset, std::span<const std::byte> data) override {
    const HostBuffer& b = checked(buffer, offset, data.size(), "upload");
    // An empty span's data() may be null, which memcpy must not be given.
    if (!data.empty()) std::memcpy(b.data() + offset, data.data(), data.size());
  }

  void download(const Buffer& buffer, std::uint64_t offset, std::span<std::byte> data) override {
    const HostBuffer& b = checked(buffer, offset, data.size(), "download");
    if (!data.empty()) std::memcpy(data.data(), b.data() + offset, data.size());
  }

  std::shared_ptr<LoadedKernel> load_kernel(const KernelSource& source, const KernelBinary& binary) override {
    KILN_CHECK(source.workgroup_size >= 1 && source.workgroup_size <= target_.max_workgroup_invocations,
               ErrorKind::Unsupported,
               "kernel '" + source.name + "' has a workgroup of " + std::to_string(source.workgroup_size) +
                   " invocations; the cpu device runs at most " + std::to_string(target_.max_workgroup_invocations));
    return std::make_shared<HostKernel>(source, binary);
  }

  std::unique_ptr<CommandList> create_command_list() override {
    return std::make_unique<HostCommandList>(target_, workers_, this);
  }

 private:
  const HostBuffer& checked(const Buffer& buffer, std::uint64_t offset, std::size_t bytes, const char* what) const {
    const auto* b = dynamic_cast<const HostBuffer*>(&buffer);
    KILN_CHECK(b != nullptr && b->device() == this, ErrorKind::InvalidArgument,
               std::string(what) + ": a buffer of another device was given to the cpu device");
    KILN_CHECK(offset + bytes <= b->size(), ErrorKind::InvalidArgument,
               std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                   " would exceed the buffer of " + std::to_string(b->size()) + " bytes");
    return *b;
  }

  TargetDesc target_;
  Workers workers_;
};

}  // namespace

TargetDesc host_target(const std::string& compiler_version, unsigned threads) {
  TargetDesc t;
  t.backend = "cpu";
  t.device_name = "host CPU (" + std::to_string(threads) + " threads)";
  t.device_type = "cpu";
  t.cpu_cores = true;
  t.host_code = true;
  t.driver = compiler_version;
  t.api_version = "C shared objects";
  struct utsname host {};
  t.arch = uname(&host) == 0 ? host.machine : "host";
  t.subgroup_size = 0;  // no subgroup operations
  t.max_workgroup_size = {1024, 1024, 64};
  t.max_workgroup_invocations = 1024;
  t.max_workgroup_count = {65535, 65535, 1};
  t.max_shared_memory_bytes = 32 * 1024;
  t.max_buffer_bytes = 1ull << 31;  // kernels index elements with 32-bit integers
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  t.device_memory_bytes = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * page / 2 : 1ull << 32;
  t.min_buffer_offset_alignment = kAlignment;
  t.int64 = true;
  t.storage8 = true;
  t.storage16 = true;
  t.fp16 = true;  // f16 arithmetic emulated in C (f32 rounded after every op)
  t.timestamps = true;  // the host's clock around each submit
  set_pointer_style_capabilities(t);
  return t;
}

std::shared_ptr<Device> create_host_device(const TargetDesc& target, unsigned threads) {
  return std::make_shared<HostDevice>(target, threads);
}

}  // namespace kiln::backend::cpu
