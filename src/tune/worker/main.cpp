// kiln-tune-worker: measures candidates for the autotuner in a process of
// its own, so that a driver crash, a hang or an exhausted device costs one
// candidate, not the tuning run (src/tune/tuner.h starts and kills it; the
// protocol is in src/tune/protocol.h).
#include "backends/registry.h"
#include "src/runtime/device_pool.h"
#include "src/tune/worker/graph_measure.h"
#include "src/tune/graph_site.h"
#include "src/tune/measure.h"
#include "src/tune/protocol.h"

#include <kiln/error.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>

namespace {

// The protocol's channel: the original stdout. Everything else that writes
// to stdout (a driver, a library) goes to stderr instead.
FILE* open_channel() {
  const int fd = dup(STDOUT_FILENO);
  if (fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return nullptr;
  return fdopen(fd, "w");
}

void send(FILE* channel, const nlohmann::json& message) {
  const std::string line = message.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), channel);
  std::fflush(channel);
}

}  // namespace

int main() {
  using namespace kiln;
  // Ctrl-C in a terminal reaches the whole process group; the tuner decides
  // what stops (and kills this process when it is done with it).
  std::signal(SIGINT, SIG_IGN);
  FILE* channel = open_channel();
  if (!channel) return 1;
  std::string line;
  if (!std::getline(std::cin, line)) return 1;
  // From the device pool, with the cache folder compiles use by default: the
  // executor that measures graph-level sites (graph_measure.h) then gets
  // this same device.
  std::shared_ptr<runtime::DeviceContext> context;
  std::shared_ptr<backend::Device> device;
  const backend::Backend* backend = nullptr;
  int device_index = 0;
  try {
    const nlohmann::json hello = nlohmann::json::parse(line);
    backend = &backend::get_backend(hello.at("backend").get<std::string>());
    device_index = hello.at("device").get<int>();
    context = runtime::acquire_device(backend->name(), std::to_string(device_index), "");
    device = context->device;
  } catch (const std::exception& error) {
    send(channel, {{"error", std::string("cannot open the device: ") + error.what()}});
    return 1;
  }
  send(channel, {{"ready", true}});

  tune::Measurer measurer(*backend, device);
  // Graph-level sites (Winograd or direct, packed or plain) compile whole one-node graphs.
  tune::GraphMeasurer graph_measurer(backend->name(), device_index);
  while (std::getline(std::cin, line)) {
    tune::CandidateResult result;
    try {
      const nlohmann::json request = nlohmann::json::parse(line);
      if (request.contains("prepare")) {
        try {
          const tune::Site site = tune::site_from_json(request.at("prepare").get<std::string>());
          const tune::MeasureOptions options = tune::options_from_json(request.at("options"));
          if (tune::is_graph_site(site)) graph_measurer.prepare(site, options);
          else measurer.prepare(site, options);
          send(channel, {{"ready", true}});
        } catch (const std::exception& error) {
          send(channel, {{"error", error.what()}});
        }
        continue;
      }
      result.knobs = request.at("knobs").get<std::string>();
      const tune::Site site = tune::site_from_json(request.at("site").get<std::string>());
      const tune::MeasureOptions options = tune::options_from_json(request.at("options"));
      if (request.contains("ahead") && !tune::is_graph_site(site)) {
        std::vector<std::string> knobs = request.at("ahead").get<std::vector<std::string>>();
        knobs.insert(knobs.begin(), result.knobs);
        measurer.compile_ahead(site, knobs, request.at("threads").get<int>());
      }
      result = tune::is_graph_site(site) ? graph_measurer.measure(site, result.knobs, options)
                                         : measurer.measure(site, result.knobs, options);
    } catch (const std::exception& error) {
      // Not the candidate's own failure (that is its status): the request or the site.
      result.status = tune::CandidateStatus::crashed;
      result.detail = std::string("tuning worker error: ") + error.what();
    }
    send(channel, {{"result", tune::result_json(result)}});
  }
  return 0;
}
