#include "convoy/train/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <iterator>

#include <nlohmann/json.hpp>

#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/io/atomic_file.h"
#include "convoy/io/model_weights.h"
#include "convoy/train/history_json.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Version 1 (epoch boundaries only, no checksum) is still read.
constexpr const char* kFormatV1 = "convoy-checkpoint-1";
constexpr const char* kFormat = "convoy-checkpoint-2";
constexpr const char* kOptimizerTensor = "optimizer.state";
constexpr const char* kChecksumKey = "checksum";

// CRC-32 of everything a checkpoint holds: every metadata entry but the
// checksum itself, then every tensor's name, dtype, shape and bytes (in name
// order, as the map iterates). A flipped bit anywhere fails the check.
std::string checksum(const io::NamedTensors& tensors, const io::Metadata& meta) {
  uLong crc = crc32(0L, Z_NULL, 0);
  auto add = [&crc](const void* data, std::size_t size) {
    const auto* p = static_cast<const Bytef*>(data);
    while (size > 0) {  // crc32 takes a uInt length
      const auto chunk = static_cast<uInt>(std::min<std::size_t>(size, 1u << 30));
      crc = crc32(crc, p, chunk);
      p += chunk;
      size -= chunk;
    }
  };
  auto add_text = [&add](const std::string& s) { add(s.c_str(), s.size() + 1); };  // with its terminator
  for (const auto& [key, value] : meta) {
    if (key == kChecksumKey) continue;
    add_text(key);
    add_text(value);
  }
  for (const auto& [name, t] : tensors) {
    add_text(name);
    add_text(dtype_name(t.dtype()));
    add_text(to_string(t.shape()));
    if (t.nbytes()) add(t.raw(), t.nbytes());
  }
  char text[24];
  std::snprintf(text, sizeof text, "crc32:%08lx", static_cast<unsigned long>(crc & 0xffffffffUL));
  return text;
}

std::string position_json(int64_t epoch, const EpochProgress& p, float lr) {
  return json{{"epoch", epoch},
              {"step", p.step},
              {"loss_sum", p.metrics.loss_sum},  // JSON numbers round-trip doubles exactly
              {"correct", p.metrics.correct},
              {"count", p.metrics.count},
              {"train_seconds", p.train_seconds},
              {"input_wait_seconds", p.input_wait_seconds},
              {"lr", lr}}
      .dump();
}

// A whole number >= 0 or a finite number from the position, or UserError.
template <class T> T field(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  bool ok = it != j.end();
  if (ok && std::is_integral_v<T>) ok = it->is_number_integer() && it->template get<int64_t>() >= 0;
  if (ok && std::is_floating_point_v<T>) ok = it->is_number() && std::isfinite(it->template get<double>());
  require(ok, where + ": checkpoint position has no valid '" + key + "'; the checkpoint is corrupt");
  return it->template get<T>();
}

int64_t parse_epoch_v1(const std::string& text, const std::string& where) {
  int64_t epoch = -1;
  try {
    std::size_t used = 0;
    epoch = std::stoll(text, &used);
    if (used != text.size()) epoch = -1;
  } catch (const std::exception&) {
  }
  require(epoch >= 0, where + ": bad epoch '" + shown(text) + "' in the checkpoint metadata; the checkpoint is corrupt");
  return epoch;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Model& model, const Executable& exe, const History& history,
                     const SaveOptions& options) {
  io::NamedTensors tensors =
      io::to_named(model, exe.internals().copy_of(Held::parameters), exe.internals().copy_of(Held::state));
  Tensor optimizer_state(DType::f32, {exe.internals().size(Held::optimizer_state)});
  exe.internals().read(Held::optimizer_state, optimizer_state.data<float>());
  tensors.emplace(kOptimizerTensor, std::move(optimizer_state));
  const int64_t epoch = history.epochs.empty() ? 0 : history.epochs.back().epoch;
  io::Metadata meta{{"format", kFormat},
                    {"position", position_json(epoch, options.progress, exe.learning_rate())},
                    {"config", options.config},
                    {"history", history_json(history)}};
  meta[kChecksumKey] = checksum(tensors, meta);
  io::AtomicWriteOptions write{.pause_before_rename_ms = options.pause_before_rename_ms};
  if (options.keep_previous) write.keep_previous_as = (fs::path(path).parent_path() / kPreviousCheckpointFile).string();
  io::write_file_atomic(path, io::safetensors_bytes(tensors, meta), write);
}

CheckpointFile parse_checkpoint_file_metadata(const io::Metadata& meta, const std::string& where) {
  const auto format = meta.find("format");
  require(format != meta.end() && (format->second == kFormat || format->second == kFormatV1) &&
              meta.count("config") && meta.count("history"),
          where + ": not a convoy checkpoint (no convoy metadata); pass the folder of a convoy train --out run");
  CheckpointFile f;
  f.config = meta.at("config");
  Checkpoint& c = f.checkpoint;
  c.history = parse_history_json(meta.at("history"), where);
  if (format->second == kFormatV1) {
    require(meta.count("epoch"), where + ": no epoch in the checkpoint metadata; the checkpoint is corrupt");
    f.version = 1;
    c.epoch = parse_epoch_v1(meta.at("epoch"), where);
    c.lr = c.history.epochs.empty() ? 0.0f : static_cast<float>(c.history.epochs.back().lr);
    return f;
  }
  require(meta.count("position"), where + ": no position in the checkpoint metadata; the checkpoint is corrupt");
  const json p = parse_json_bounded(meta.at("position"), where + ": the checkpoint is corrupt: bad position");
  require(p.is_object(), where + ": bad checkpoint position; the checkpoint is corrupt");
  c.epoch = field<int64_t>(p, "epoch", where);
  c.progress.step = field<int64_t>(p, "step", where);
  c.progress.metrics.loss_sum = field<double>(p, "loss_sum", where);
  c.progress.metrics.correct = field<int64_t>(p, "correct", where);
  c.progress.metrics.count = field<int64_t>(p, "count", where);
  c.progress.train_seconds = field<double>(p, "train_seconds", where);
  c.progress.input_wait_seconds = field<double>(p, "input_wait_seconds", where);
  const double lr = field<double>(p, "lr", where);
  // What validate() lets a run use (a positive float) is what a checkpoint may hold.
  require(lr > 0 && lr <= std::numeric_limits<float>::max(),
          where + ": checkpoint learning rate out of range; the checkpoint is corrupt");
  c.lr = static_cast<float>(lr);
  require(c.progress.metrics.correct <= c.progress.metrics.count &&
              (c.history.epochs.empty() ? c.epoch == 0 : c.history.epochs.back().epoch == c.epoch),
          where + ": checkpoint position does not match its history; the checkpoint is corrupt");
  return f;
}

CheckpointFile parse_checkpoint_file(std::string_view bytes, const std::string& where) {
  io::Metadata meta;
  io::NamedTensors tensors = io::parse_safetensors(bytes, where, &meta);
  const auto stored = meta.find(kChecksumKey);
  if (stored != meta.end()) {
    require(stored->second == checksum(tensors, meta),
            where + ": fails its integrity check (checksum mismatch); the file is damaged");
  } else {
    require(meta.count("format") && meta.at("format") == kFormatV1,
            where + ": has no checksum; the checkpoint is damaged or not convoy's");
  }
  CheckpointFile f = parse_checkpoint_file_metadata(meta, where);
  f.tensors = std::move(tensors);
  return f;
}

Checkpoint checkpoint_of(CheckpointFile file, const nn::Model& model, const optim::OptimizerOptions& optimizer,
                         const std::string& where) {
  Checkpoint c = std::move(file.checkpoint);
  io::FlatWeights w = io::from_named(model, file.tensors, where);
  c.params = std::move(w.params);
  c.state = std::move(w.state);
  auto it = file.tensors.find(kOptimizerTensor);
  const int64_t want = optim::state_size(optimizer, model.num_trainable_parameters());
  require(it != file.tensors.end() && it->second.dtype() == DType::f32 && it->second.numel() == want,
          where + ": missing or mis-sized '" + std::string(kOptimizerTensor) + "'; the checkpoint is corrupt");
  const auto v = it->second.data<float>();
  c.optimizer_state.assign(v.begin(), v.end());
  return c;
}

CheckpointSaver::CheckpointSaver(std::string path, const nn::Model& model, std::string config,
                                 CheckpointSaverOptions options)
    : path_(std::move(path)), model_(model), config_(std::move(config)), options_(std::move(options)),
      maximize_(options_.monitor.find("acc") != std::string::npos) {
  check_metric_name(options_.monitor, "checkpoint monitor");
  require(options_.every_steps >= 0, "training.checkpoint_every_steps must be 0 (off) or positive");
}

bool CheckpointSaver::improved(double v) const { return !best_ || (maximize_ ? v > *best_ : v < *best_); }

void CheckpointSaver::on_train_begin(FitState& s) {
  // A resumed run remembers which of its earlier epochs was the best.
  best_.reset();
  if (options_.save_best_only)
    for (const auto& r : s.history.epochs)
      if (const double v = metric_value(r, options_.monitor); improved(v)) best_ = v;
}

void CheckpointSaver::on_step_end(FitState& s) {
  if (options_.save_best_only) return;
  const bool periodic = options_.every_steps > 0 && s.step % options_.every_steps == 0 && s.step < s.steps_per_epoch;
  if (periodic || s.interrupted)
    save_checkpoint(path_, model_, s.exe, s.history,
                    {.config = config_,
                     .progress = s.progress(),
                     .keep_previous = options_.keep_previous,
                     .pause_before_rename_ms = options_.pause_before_rename_ms});
}

void CheckpointSaver::on_epoch_end(FitState& s, const EpochRecord& r) {
  if (options_.save_best_only) {
    const double v = metric_value(r, options_.monitor);
    if (!improved(v)) return;
    best_ = v;
  }
  save_checkpoint(path_, model_, s.exe, s.history,
                  {.config = config_, .keep_previous = options_.keep_previous, .pause_before_rename_ms = options_.pause_before_rename_ms});
}

}  // namespace convoy::train
