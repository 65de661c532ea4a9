#include "report.h"
#include "format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>

namespace kiln::tools::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Distinct values in first-seen order: the order the run used.
template <class T, class Key> std::vector<T> distinct(const std::vector<Cell>& cells, Key key) {
  std::vector<T> out;
  for (const Cell& c : cells)
    if (std::find(out.begin(), out.end(), key(c)) == out.end()) out.push_back(key(c));
  return out;
}

std::vector<std::string> modes_of(const Results& r) {
  return distinct<std::string>(r.cells, [](const Cell& c) { return c.mode; });
}
std::vector<std::int64_t> batches_of(const Results& r) {
  return distinct<std::int64_t>(r.cells, [](const Cell& c) { return c.batch; });
}

const Cell* find_cell(const Results& r, const std::string& model, std::int64_t batch, const std::string& mode) {
  for (const Cell& c : r.cells)
    if (c.model == model && c.batch == batch && c.mode == mode) return &c;
  return nullptr;
}

std::string time_text(const Cell* c) {
  if (c == nullptr) return "-";
  switch (c->status) {
    case CellStatus::ok: return format("%.2f", c->host_ms.mean);
    case CellStatus::mismatch: return format("%.2f **WRONG OUTPUT**", c->host_ms.mean);
    case CellStatus::failed: return "failed";
    case CellStatus::skipped: return "skipped";
  }
  return "-";
}

std::string speedup_text(const Cell* c) {
  return (c && c->speedup) ? format("%.2fx", *c->speedup) : "-";
}

std::string compile_text(const Cell* c) {
  if (c == nullptr || !c->cold_compile_ms || !c->warm_compile_ms) return "-";
  return format("%.0f / %.0f", *c->cold_compile_ms, *c->warm_compile_ms);
}

std::string peak_text(const Cell* c) {
  return (c && c->measured()) ? format("%.1f", static_cast<double>(c->peak_device_bytes) / kMiB) : "-";
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char ch : text) quoted += (ch == '"') ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

std::string number(std::optional<double> value) { return value ? format("%.6g", *value) : ""; }

nlohmann::json summary_json(const Summary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"median", s.median}, {"min", s.min}, {"max", s.max}};
}

template <class T> nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

std::vector<SpeedupMean> speedup_geomeans(const Results& results) {
  std::vector<SpeedupMean> means;
  for (const std::string& mode : modes_of(results)) {
    if (mode == results.baseline) continue;
    auto mean_over = [&](std::optional<std::int64_t> batch) {
      std::vector<double> speedups;
      for (const Cell& c : results.cells)
        if (c.mode == mode && c.status == CellStatus::ok && c.speedup && (!batch || c.batch == *batch))
          speedups.push_back(*c.speedup);
      if (!speedups.empty())
        means.push_back({mode, batch, geometric_mean(speedups), static_cast<int>(speedups.size())});
    };
    for (std::int64_t batch : batches_of(results)) mean_over(batch);
    mean_over(std::nullopt);
  }
  return means;
}

std::string markdown_report(const Results& results) {
  const Metadata& m = results.metadata;
  const std::vector<std::string> modes = modes_of(results);
  const std::vector<std::int64_t> batches = batches_of(results);
  std::vector<std::string> compiled_modes, compared_modes;  // compared: all but the baseline
  for (const auto& mode : modes) {
    if (mode != kEagerMode) compiled_modes.push_back(mode);
    if (mode != results.baseline) compared_modes.push_back(mode);
  }

  std::string out = "# kiln bench\n\n";
  out += "- device: " + m.device_name + " (" + m.device_type + "), backend " + m.backend + ", driver " + m.driver +
         ", API " + m.api_version + "\n";
  out += "- compiler: " + m.compiler + "\n";
  const std::string warmup = std::to_string(m.warmup), iters = std::to_string(m.iters);
  out += "- method: per model and batch, every mode's model is built and compiled first and all stay alive; after one "
         "untimed first call each and " + warmup + " warm-up round(s), " + iters + " timed round(s) each call every "
         "mode once, the order rotating by one mode per round, so drift and process state weigh on every mode alike; "
         "the mean (median, min, max) of each mode's " + iters + " calls (host wall time per call), the same image "
         "every call\n";
  out += "- image: " + m.image + "\n";
  out += "- date: " + m.date_utc + ", kiln " + m.kiln_version + format(", %u host threads", m.host_threads) + "\n";
  if (!m.environment.empty()) {
    out += "- environment:";
    for (const auto& [name, value] : m.environment) out += " " + name + "=" + value;
    out += "\n";
  }
  out += "- reproduce: `" + m.command + "`\n\n";

  std::string header = "| model | task | batch | size |";
  std::string rule = "| --- | --- | ---: | ---: |";
  for (const auto& mode : modes) {
    header += " " + mode + " ms |";
    rule += " ---: |";
    if (mode != results.baseline) {
      header += " speed-up |";
      rule += " ---: |";
    }
  }
  for (const auto& mode : compiled_modes) {
    header += " " + mode + " compile cold / warm ms |";
    rule += " ---: |";
  }
  std::string peak_modes;
  for (const auto& mode : modes) peak_modes += (peak_modes.empty() ? "" : " / ") + mode;
  header += " peak MiB " + peak_modes + " |";
  rule += " ---: |";
  out += header + "\n" + rule + "\n";

  std::vector<std::pair<std::string, std::int64_t>> rows;
  for (const Cell& c : results.cells)
    if (std::find(rows.begin(), rows.end(), std::pair{c.model, c.batch}) == rows.end()) rows.emplace_back(c.model, c.batch);
  for (const auto& [model, batch] : rows) {
    const Cell* any = find_cell(results, model, batch, modes.front());
    out += "| " + model + " | " + (any->task.empty() ? "-" : any->task) + " | " + std::to_string(batch) + " | " +
           std::to_string(any->image_size) + " |";
    for (const auto& mode : modes) {
      const Cell* c = find_cell(results, model, batch, mode);
      out += " " + time_text(c) + " |";
      if (mode != results.baseline) out += " " + speedup_text(c) + " |";
    }
    for (const auto& mode : compiled_modes) out += " " + compile_text(find_cell(results, model, batch, mode)) + " |";
    std::string peaks;
    for (const auto& mode : modes) peaks += (peaks.empty() ? "" : " / ") + peak_text(find_cell(results, model, batch, mode));
    out += " " + peaks + " |\n";
  }

  if (!compared_modes.empty()) {
    out += "\nGeometric mean of the speed-up over " + results.baseline +
           " (cells that match eager's output; n = models):\n\n| mode |";
    std::string geo_rule = "| --- |";
    for (auto b : batches) {
      out += " batch " + std::to_string(b) + " |";
      geo_rule += " ---: |";
    }
    out += " all batches |\n" + geo_rule + " ---: |\n";
    const std::vector<SpeedupMean> means = speedup_geomeans(results);
    for (const auto& mode : compared_modes) {
      out += "| " + mode + " |";
      auto text_for = [&](std::optional<std::int64_t> batch) {
        for (const auto& g : means)
          if (g.mode == mode && g.batch == batch) return format("%.2fx (n=%d)", g.geomean, g.cells);
        return std::string("-");
      };
      for (auto b : batches) out += " " + text_for(b) + " |";
      out += " " + text_for(std::nullopt) + " |\n";
    }
  }

  // One note per cell that is not ok, or one per model and batch when all its
  // cells share the outcome (a skipped batch size, a model that failed to build).
  std::string notes;
  for (const auto& [model, batch] : rows) {
    std::vector<const Cell*> cells;
    for (const auto& mode : modes) cells.push_back(find_cell(results, model, batch, mode));
    const bool shared = std::all_of(cells.begin(), cells.end(), [&](const Cell* c) {
      return c->status == cells[0]->status && c->message == cells[0]->message;
    });
    for (const Cell* c : cells) {
      if (c->status == CellStatus::ok) continue;
      const std::string what = c->status == CellStatus::mismatch ? "**WRONG OUTPUT**" : status_name(c->status);
      const std::string which = shared && cells.size() > 1 ? "every mode" : c->mode;
      notes += "- " + model + ", batch " + std::to_string(batch) + ", " + which + ": " + what + ": " + c->message + "\n";
      if (shared) break;
    }
    for (const Cell* c : cells)
      if (c->status == CellStatus::ok && c->tied_detections > 0)
        notes += "- " + model + ", batch " + std::to_string(batch) + ", " + c->mode + ": matches eager; " +
                 std::to_string(c->tied_detections) +
                 " detection(s) in one list only were accepted as ties (tied scores of the same label missing "
                 "from the other list too, or at the lists' lowest score)\n";
  }
  if (!notes.empty()) out += "\nNotes:\n\n" + notes;
  return out;
}

std::string csv_report(const Results& results) {
  std::string out =
      "model,task,batch,image_size,mode,status,iters,warmup,first_call_ms,mean_ms,median_ms,min_ms,max_ms,device_mean_ms,"
      "device_median_ms,device_min_ms,device_max_ms,speedup,cold_compile_ms,warm_compile_ms,kernels_compiled_cold,"
      "kernels_from_disk_warm,kernels_compiled_warm,peak_device_bytes,dispatches_per_run,host_steps_per_run,kernels,"
      "max_abs_diff,output_scale,tied_detections,message\n";
  const Metadata& m = results.metadata;
  for (const Cell& c : results.cells) {
    const bool measured = c.measured();
    auto timing = [&](double value) { return measured ? format("%.6g", value) : std::string(); };
    auto device = [&](double Summary::*field) { return c.device_ms ? format("%.6g", (*c.device_ms).*field) : std::string(); };
    std::vector<std::string> fields{
        csv_field(c.model), csv_field(c.task), std::to_string(c.batch), std::to_string(c.image_size), c.mode,
        status_name(c.status), std::to_string(m.iters), std::to_string(m.warmup),
        timing(c.first_call_ms), timing(c.host_ms.mean), timing(c.host_ms.median), timing(c.host_ms.min), timing(c.host_ms.max),
        device(&Summary::mean), device(&Summary::median), device(&Summary::min), device(&Summary::max),
        number(c.speedup), number(c.cold_compile_ms), number(c.warm_compile_ms),
        c.cold_compile_ms ? std::to_string(c.kernels_compiled_cold) : "",
        c.warm_compile_ms ? std::to_string(c.kernels_from_disk_warm) : "",
        c.warm_compile_ms ? std::to_string(c.kernels_compiled_warm) : "",
        measured ? std::to_string(c.peak_device_bytes) : "", measured ? std::to_string(c.dispatches_per_run) : "",
        measured ? std::to_string(c.host_steps_per_run) : "", measured ? std::to_string(c.kernels) : "",
        number(c.max_abs_diff), number(c.output_scale), c.max_abs_diff ? std::to_string(c.tied_detections) : "",
        csv_field(c.message)};
    std::string line;
    for (const auto& f : fields) line += (line.empty() ? "" : ",") + f;
    out += line + "\n";
  }
  return out;
}

std::string json_report(const Results& results) {
  const Metadata& m = results.metadata;
  nlohmann::json environment = nlohmann::json::object();
  for (const auto& [name, value] : m.environment) environment[name] = value;
  nlohmann::json doc;
  doc["metadata"] = {{"kiln_version", m.kiln_version}, {"date_utc", m.date_utc},   {"backend", m.backend},
                     {"device", m.device_name},         {"device_type", m.device_type}, {"driver", m.driver},
                     {"api_version", m.api_version},    {"compiler", m.compiler},  {"image", m.image},
                     {"iters", m.iters},                {"warmup", m.warmup},      {"tolerance", m.tolerance},
                     {"host_threads", m.host_threads},  {"environment", environment}, {"command", m.command}};
  nlohmann::json cells = nlohmann::json::array();
  for (const Cell& c : results.cells) {
    const bool measured = c.measured();
    nlohmann::json j = {{"model", c.model}, {"task", c.task}, {"batch", c.batch}, {"image_size", c.image_size},
                        {"mode", c.mode}, {"status", status_name(c.status)}, {"message", c.message}};
    j["first_call_ms"] = measured ? nlohmann::json(c.first_call_ms) : nlohmann::json(nullptr);
    j["host_ms"] = measured ? summary_json(c.host_ms) : nlohmann::json(nullptr);
    j["device_ms"] = c.device_ms ? summary_json(*c.device_ms) : nlohmann::json(nullptr);
    j["speedup"] = optional_json(c.speedup);
    j["cold_compile_ms"] = optional_json(c.cold_compile_ms);
    j["warm_compile_ms"] = optional_json(c.warm_compile_ms);
    if (c.cold_compile_ms) j["kernels_compiled_cold"] = c.kernels_compiled_cold;
    if (c.warm_compile_ms) {
      j["kernels_from_disk_warm"] = c.kernels_from_disk_warm;
      j["kernels_compiled_warm"] = c.kernels_compiled_warm;
    }
    j["peak_device_bytes"] = measured ? nlohmann::json(c.peak_device_bytes) : nlohmann::json(nullptr);
    j["dispatches_per_run"] = measured ? nlohmann::json(c.dispatches_per_run) : nlohmann::json(nullptr);
    j["host_steps_per_run"] = measured ? nlohmann::json(c.host_steps_per_run) : nlohmann::json(nullptr);
    j["kernels"] = measured ? nlohmann::json(c.kernels) : nlohmann::json(nullptr);
    j["max_abs_diff"] = optional_json(c.max_abs_diff);
    j["output_scale"] = optional_json(c.output_scale);
    j["tied_detections"] = c.max_abs_diff ? nlohmann::json(c.tied_detections) : nlohmann::json(nullptr);
    cells.push_back(std::move(j));
  }
  doc["cells"] = std::move(cells);
  nlohmann::json means = nlohmann::json::array();
  for (const auto& g : speedup_geomeans(results))
    means.push_back({{"mode", g.mode}, {"batch", optional_json(g.batch)}, {"geomean", g.geomean}, {"cells", g.cells}});
  doc["geomean_speedups"] = std::move(means);
  doc["baseline"] = results.baseline;
  return doc.dump(2) + "\n";
}

}  // namespace kiln::tools::bench
