#include "backends/cuda_style/device.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

namespace kiln::backend::cuda_style {
namespace {

// Uploads and downloads move through page-locked memory in pieces of this size.
constexpr std::size_t kStagingBytes = std::size_t{16} << 20;
// How many kernels an error about a whole submit names.
constexpr std::size_t kNamedKernels = 8;

std::string size_text(std::uint64_t bytes) { return std::to_string(bytes) + " bytes"; }

// The device's context, streams and staging memory; every buffer, kernel and
// command list keeps it alive.
class Context {
 public:
  Context(const VendorTable& vendor, int ordinal, TargetDesc target)
      : vendor_(vendor), ordinal_(ordinal), target_(std::move(target)) {
    const Status opened = vendor_.open_device(ordinal_, &context_);
    KILN_CHECK(opened == 0, ErrorKind::DeviceUnavailable,
               prefix() + "cannot open device " + std::to_string(ordinal_) + " (" + target_.device_name +
                   "): " + vendor_.error_name(opened));
  }

  ~Context() {
    if (vendor_.bind(ordinal_, context_) == 0) {
      for (Handle stream : idle_streams_) vendor_.destroy_stream(stream);
      if (staging_ != nullptr) vendor_.release_host(staging_);
    }
    vendor_.close_device(ordinal_, context_);
  }

  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const VendorTable& vendor() const { return vendor_; }
  const TargetDesc& target() const { return target_; }
  std::string prefix() const { return std::string(vendor_.backend) + ": "; }

  // Every entry point binds first: the vendor's current context is per thread.
  void bind() const { check(vendor_.bind(ordinal_, context_), "making the device's context current"); }

  // Throws for a failed vendor call: OutOfMemory for the vendor's
  // out-of-memory code, DeviceUnavailable for one that leaves the context
  // unusable (the device is lost), else Internal (kiln asked for something
  // invalid).
  void check(Status status, const std::string& what) const {
    if (status == 0) return;
    const std::string message = prefix() + what + " failed on " + target_.device_name + ": " + vendor_.error_name(status);
    if (status == vendor_.out_of_memory) throw_error(ErrorKind::OutOfMemory, message);
    if (std::find(vendor_.device_lost.begin(), vendor_.device_lost.end(), status) != vendor_.device_lost.end())
      throw_error(ErrorKind::DeviceUnavailable, message + ": the device was lost (make its models again)");
    throw_error(ErrorKind::Internal, message);
  }

  // Streams are pooled: command lists are made per run in default mode.
  Handle acquire_stream() {
    {
      std::lock_guard lock(streams_mutex_);
      if (!idle_streams_.empty()) {
        Handle stream = idle_streams_.back();
        idle_streams_.pop_back();
        return stream;
      }
    }
    Handle stream = nullptr;
    check(vendor_.create_stream(&stream), "creating a stream");
    return stream;
  }
  void release_stream(Handle stream) {
    std::lock_guard lock(streams_mutex_);
    idle_streams_.push_back(stream);
  }

  // Host <-> device copies through the staging buffer, one at a time per device.
  void copy_to_device(DevicePtr dst, std::span<const std::byte> data) {
    std::lock_guard lock(staging_mutex_);
    StreamLease stream(*this);
    for (std::size_t done = 0; done < data.size(); done += kStagingBytes) {
      const std::size_t piece = std::min(kStagingBytes, data.size() - done);
      std::memcpy(staging(), data.data() + done, piece);
      check(vendor_.copy_to_device(dst + done, staging(), piece, stream.handle), "an upload");
      check(vendor_.synchronize_stream(stream.handle), "waiting for an upload");
    }
  }
  void copy_to_host(std::span<std::byte> data, DevicePtr src) {
    std::lock_guard lock(staging_mutex_);
    StreamLease stream(*this);
    for (std::size_t done = 0; done < data.size(); done += kStagingBytes) {
      const std::size_t piece = std::min(kStagingBytes, data.size() - done);
      check(vendor_.copy_to_host(staging(), src + done, piece, stream.handle), "a download");
      check(vendor_.synchronize_stream(stream.handle), "waiting for a download");
      std::memcpy(data.data() + done, staging(), piece);
    }
  }

  struct StreamLease {
    explicit StreamLease(Context& context) : context(context), handle(context.acquire_stream()) {}
    ~StreamLease() { context.release_stream(handle); }
    Context& context;
    Handle handle;
  };

 private:
  void* staging() {
    if (staging_ == nullptr) check(vendor_.allocate_host(&staging_, kStagingBytes), "allocating page-locked memory");
    return staging_;
  }

  const VendorTable& vendor_;
  int ordinal_;
  Handle context_ = nullptr;
  TargetDesc target_;
  std::mutex streams_mutex_;
  std::vector<Handle> idle_streams_;
  std::mutex staging_mutex_;
  void* staging_ = nullptr;
};

class GpuBuffer final : public Buffer {
 public:
  GpuBuffer(std::shared_ptr<Context> context, DevicePtr pointer, std::uint64_t bytes)
      : context_(std::move(context)), pointer_(pointer), bytes_(bytes) {}
  ~GpuBuffer() override {
    try {
      context_->bind();
      context_->vendor().release(pointer_);
    } catch (const Error&) {
      // A destructor cannot report; the context's teardown frees the memory.
    }
  }
  std::uint64_t size() const override { return bytes_; }
  DevicePtr pointer() const { return pointer_; }
  const Context* context() const { return context_.get(); }

 private:
  std::shared_ptr<Context> context_;
  DevicePtr pointer_;
  std::uint64_t bytes_;
};

class GpuKernel final : public LoadedKernel {
 public:
  GpuKernel(std::shared_ptr<Context> context, const KernelSource& source, const KernelBinary& binary)
      : context_(std::move(context)),
        name_(source.name),
        workgroup_size_(source.workgroup_size),
        num_buffers_(source.num_buffers),
        num_params_(source.num_params),
        dynamic_shared_bytes_(source.dynamic_shared_bytes) {
    context_->bind();
    std::vector<std::byte> image = binary.data;
    if (binary.format == "ptx" && (image.empty() || image.back() != std::byte{0})) image.push_back(std::byte{0});
    context_->check(context_->vendor().load_module(&module_, image.data()),
                    "loading kernel '" + name_ + "' (" + binary.format + ")");
    const Status found = context_->vendor().get_function(&function_, module_, name_.c_str());
    if (found != 0) {
      context_->vendor().unload_module(module_);
      context_->check(found, "finding kernel '" + name_ + "' in its module");
    }
    if (dynamic_shared_bytes_ != 0) {
      const Status allowed = context_->vendor().allow_dynamic_shared(function_, dynamic_shared_bytes_);
      if (allowed != 0) {
        context_->vendor().unload_module(module_);
        context_->check(allowed, "letting kernel '" + name_ + "' use " + std::to_string(dynamic_shared_bytes_) +
                                     " bytes of dynamic shared memory");
      }
    }
  }
  ~GpuKernel() override {
    try {
      context_->bind();
      context_->vendor().unload_module(module_);
    } catch (const Error&) {
    }
  }
  const std::string& name() const override { return name_; }
  Handle function() const { return function_; }
  std::uint32_t workgroup_size() const { return workgroup_size_; }
  std::uint32_t num_buffers() const { return num_buffers_; }
  std::uint32_t num_params() const { return num_params_; }
  std::uint32_t dynamic_shared_bytes() const { return dynamic_shared_bytes_; }
  const Context* context() const { return context_.get(); }

 private:
  std::shared_ptr<Context> context_;
  std::string name_;
  std::uint32_t workgroup_size_, num_buffers_, num_params_, dynamic_shared_bytes_;
  Handle module_ = nullptr;
  Handle function_ = nullptr;
};

class GpuCommandList final : public CommandList {
 public:
  explicit GpuCommandList(std::shared_ptr<Context> context) : context_(std::move(context)) {}

  ~GpuCommandList() override {
    try {
      context_->bind();
      const VendorTable& v = context_->vendor();
      if (graph_instance_ != nullptr) v.destroy_graph_instance(graph_instance_);
      if (graph_ != nullptr) v.destroy_graph(graph_);
      if (start_ != nullptr) v.destroy_event(start_);
      if (end_ != nullptr) v.destroy_event(end_);
    } catch (const Error&) {
    }
  }

  void dispatch(LoadedKernel& kernel, std::array<std::uint32_t, 3> groups, std::span<const BufferBinding> bindings,
                std::span<const std::int32_t> params) override {
    KILN_CHECK(!finished_, ErrorKind::InvalidArgument, "a finished command list cannot record more");
    auto* k = dynamic_cast<GpuKernel*>(&kernel);
    KILN_CHECK(k != nullptr && k->context() == context_.get(), ErrorKind::InvalidArgument,
               context_->prefix() + "kernel '" + kernel.name() + "' was loaded on another device");
    const TargetDesc& target = context_->target();
    check_dispatch(k->name(), k->num_buffers(), k->num_params(), groups, bindings, params, target,
                   target.min_buffer_offset_alignment);
    Launch launch{k, {groups[0], groups[1], groups[2]}, {}, {params.begin(), params.end()}, {}};
    for (std::size_t i = 0; i < bindings.size(); ++i) {
      const GpuBuffer& b = buffer_of(*bindings[i].buffer);
      const std::uint64_t offset = bindings[i].offset;
      launch.pointers.push_back(b.pointer() + offset);
    }
    steps_.emplace_back(std::move(launch));
  }

  void copy(const Buffer& src, std::uint64_t src_offset, Buffer& dst, std::uint64_t dst_offset,
            std::uint64_t bytes) override {
    KILN_CHECK(!finished_, ErrorKind::InvalidArgument, "a finished command list cannot record more");
    const GpuBuffer& s = buffer_of(src);
    const GpuBuffer& d = buffer_of(dst);
    KILN_CHECK(src_offset + bytes <= s.size() && dst_offset + bytes <= d.size(), ErrorKind::InvalidArgument,
               "a copy of " + size_text(bytes) + " from offset " + std::to_string(src_offset) + " of " +
                   size_text(s.size()) + " to offset " + std::to_string(dst_offset) + " of " + size_text(d.size()) +
                   " would exceed a buffer");
    if (bytes > 0) steps_.emplace_back(Copy{s.pointer() + src_offset, d.pointer() + dst_offset, bytes});
  }

  // The launches' argument arrays point into the steps, which no longer move.
  void finish() override {
    KILN_CHECK(!finished_, ErrorKind::InvalidArgument, "finish() called twice on a command list");
    finished_ = true;
    for (auto& step : steps_) {
      auto* launch = std::get_if<Launch>(&step);
      if (launch == nullptr) continue;
      for (DevicePtr& pointer : launch->pointers) launch->args.push_back(&pointer);
      if (!launch->params.empty()) launch->args.push_back(launch->params.data());
    }
  }

  void submit() override {
    KILN_CHECK(finished_, ErrorKind::InvalidArgument, "submit() before finish()");
    context_->bind();
    const VendorTable& v = context_->vendor();
    Context::StreamLease stream(*context_);
    if (start_ == nullptr) {
      context_->check(v.create_event(&start_), "creating an event");
      context_->check(v.create_event(&end_), "creating an event");
    }
    // A list submitted a second time is a recorded replay: capture it once.
    if (submits_ == 1 && graph_instance_ == nullptr && !steps_.empty()) capture(stream.handle);
    context_->check(v.record_event(start_, stream.handle), "recording an event");
    if (graph_instance_ != nullptr)
      context_->check(v.launch_graph(graph_instance_, stream.handle), "launching the recorded graph of " + kernels());
    else
      enqueue(stream.handle);
    context_->check(v.record_event(end_, stream.handle), "recording an event");
    const Status done = v.synchronize_stream(stream.handle);
    if (done != 0)
      context_->check(done, "running " + kernels() +
                                " (a fault in a kernel leaves the device unusable until it is created again)");
    float ms = 0.0f;
    context_->check(v.elapsed_ms(&ms, start_, end_), "reading the events' times");
    last_ms_ = ms;
    ++submits_;
  }

  std::optional<double> last_device_ms() const override { return last_ms_; }

 private:
  struct Launch {
    GpuKernel* kernel;
    unsigned groups[3];
    std::vector<DevicePtr> pointers;
    std::vector<std::int32_t> params;  // laid out as the kernel's KilnParams struct
    std::vector<void*> args;
  };
  struct Copy {
    DevicePtr src, dst;
    std::uint64_t bytes;
  };

  const GpuBuffer& buffer_of(const Buffer& buffer) const {
    const auto* b = dynamic_cast<const GpuBuffer*>(&buffer);
    KILN_CHECK(b != nullptr && b->context() == context_.get(), ErrorKind::InvalidArgument,
               context_->prefix() + "a buffer of another device was given to a command list");
    return *b;
  }

  void enqueue(Handle stream) {
    const VendorTable& v = context_->vendor();
    for (auto& step : steps_) {
      if (auto* launch = std::get_if<Launch>(&step)) {
        const Status status =
            v.launch(launch->kernel->function(), launch->groups, launch->kernel->workgroup_size(),
                     launch->kernel->dynamic_shared_bytes(), stream, launch->args.data());
        context_->check(status, "launching kernel '" + launch->kernel->name() + "' (" +
                                    std::to_string(launch->groups[0]) + "x" + std::to_string(launch->groups[1]) +
                                    "x" + std::to_string(launch->groups[2]) + " blocks of " +
                                    std::to_string(launch->kernel->workgroup_size()) + ")");
      } else {
        const Copy& copy = std::get<Copy>(step);
        context_->check(v.copy_on_device(copy.dst, copy.src, copy.bytes, stream), "a copy on the device");
      }
    }
  }

  // Records the steps into a graph by capturing the stream, and instantiates it.
  void capture(Handle stream) {
    const VendorTable& v = context_->vendor();
    context_->check(v.begin_capture(stream), "starting a graph capture");
    try {
      enqueue(stream);
    } catch (const Error&) {
      Handle abandoned = nullptr;
      if (v.end_capture(stream, &abandoned) == 0 && abandoned != nullptr) v.destroy_graph(abandoned);
      throw;
    }
    context_->check(v.end_capture(stream, &graph_), "ending the graph capture of " + kernels());
    context_->check(v.instantiate_graph(&graph_instance_, graph_), "instantiating the graph of " + kernels());
  }

  // "kernels 'a', 'b' and 3 more": what a submit ran, for its errors.
  std::string kernels() const {
    std::vector<std::string> names;
    std::size_t launches = 0;
    for (const auto& step : steps_) {
      const auto* launch = std::get_if<Launch>(&step);
      if (launch == nullptr) continue;
      ++launches;
      const std::string quoted = "'" + launch->kernel->name() + "'";
      if (names.size() < kNamedKernels && std::find(names.begin(), names.end(), quoted) == names.end())
        names.push_back(quoted);
    }
    if (launches == 0) return "a list of copies";
    std::string text = launches == 1 ? "kernel " : std::to_string(launches) + " launches of kernels ";
    for (std::size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "") + names[i];
    if (names.size() == kNamedKernels) text += ", ...";
    return text;
  }

  std::shared_ptr<Context> context_;
  std::vector<std::variant<Launch, Copy>> steps_;
  bool finished_ = false;
  std::size_t submits_ = 0;
  Handle start_ = nullptr, end_ = nullptr;
  Handle graph_ = nullptr, graph_instance_ = nullptr;
  std::optional<double> last_ms_;
};

class GpuDevice final : public Device {
 public:
  explicit GpuDevice(std::shared_ptr<Context> context) : context_(std::move(context)) {}

  const TargetDesc& target() const override { return context_->target(); }

  std::shared_ptr<Buffer> allocate(std::uint64_t bytes) override {
    const TargetDesc& t = target();
    KILN_CHECK(bytes <= t.max_buffer_bytes, ErrorKind::OutOfMemory,
               context_->prefix() + "cannot allocate " + size_text(bytes) + " on " + t.device_name + ": it has " +
                   size_text(t.max_buffer_bytes));
    context_->bind();
    DevicePtr pointer = 0;
    const Status status = context_->vendor().allocate(&pointer, std::max<std::uint64_t>(bytes, 1));
    if (status == context_->vendor().out_of_memory) {
      std::size_t free_bytes = 0, total_bytes = 0;
      const bool known = context_->vendor().memory_info(&free_bytes, &total_bytes) == 0;
      throw_error(ErrorKind::OutOfMemory,
                  context_->prefix() + "out of memory allocating " + size_text(bytes) + " on " + t.device_name +
                      (known ? " (" + size_text(free_bytes) + " of " + size_text(total_bytes) + " free)" : ""));
    }
    context_->check(status, "allocating " + size_text(bytes));
    return std::make_shared<GpuBuffer>(context_, pointer, bytes);
  }

  void upload(Buffer& buffer, std::uint64_t offset, std::span<const std::byte> data) override {
    const GpuBuffer& b = checked(buffer, offset, data.size(), "upload");
    context_->bind();
    context_->copy_to_device(b.pointer() + offset, data);
  }

  void download(const Buffer& buffer, std::uint64_t offset, std::span<std::byte> data) override {
    const GpuBuffer& b = checked(buffer, offset, data.size(), "download");
    context_->bind();
    context_->copy_to_host(data, b.pointer() + offset);
  }

  std::shared_ptr<LoadedKernel> load_kernel(const KernelSource& source, const KernelBinary& binary) override {
    const TargetDesc& t = target();
    KILN_CHECK(source.workgroup_size >= 1 && source.workgroup_size <= t.max_workgroup_invocations,
               ErrorKind::Unsupported,
               "kernel '" + source.name + "' has a workgroup of " + std::to_string(source.workgroup_size) +
                   " invocations; " + t.device_name + " runs at most " + std::to_string(t.max_workgroup_invocations));
    return std::make_shared<GpuKernel>(context_, source, binary);
  }

  std::unique_ptr<CommandList> create_command_list() override {
    return std::make_unique<GpuCommandList>(context_);
  }

 private:
  const GpuBuffer& checked(const Buffer& buffer, std::uint64_t offset, std::size_t bytes, const char* what) const {
    const auto* b = dynamic_cast<const GpuBuffer*>(&buffer);
    KILN_CHECK(b != nullptr && b->context() == context_.get(), ErrorKind::InvalidArgument,
               context_->prefix() + what + ": a buffer of another device");
    KILN_CHECK(offset + bytes <= b->size(), ErrorKind::InvalidArgument,
               context_->prefix() + what + " of " + size_text(bytes) + " at offset " + std::to_string(offset) +
                   " would exceed the buffer of " + size_text(b->size()));
    return *b;
  }

  std::shared_ptr<Context> context_;
};

}  // namespace

std::shared_ptr<Device> create_device(const VendorTable& vendor, int ordinal, TargetDesc target) {
  return std::make_shared<GpuDevice>(std::make_shared<Context>(vendor, ordinal, std::move(target)));
}

}  // namespace kiln::backend::cuda_style
