// write_shards: shuffle the manifest, cut it into shards of about the target
// size (from the image files' sizes), write each shard's records.
#include "convoy/records/shards.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "convoy/core/error.h"
#include "convoy/core/rng.h"
#include "convoy/core/temporary_files.h"
#include "convoy/core/untrusted.h"
#include "convoy/io/atomic_file.h"
#include "convoy/io/output_folder.h"
#include "convoy/records/example_proto.h"
#include "convoy/records/tfrecord.h"
#include "convoy/records/tfrecord_dataset.h"

namespace convoy::records {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kRecordOverhead = 128;  // framing, keys and label beside the image bytes (an estimate)

std::string format_of(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".png") return "png";
  if (ext == ".jpg" || ext == ".jpeg") return "jpeg";
  return ext.empty() ? "unknown" : ext.substr(1);
}

ExampleProto record_of(const Manifest& m, const ManifestEntry& e, const Tensor& bytes) {
  ExampleProto p;
  const auto* data = static_cast<const char*>(bytes.raw());
  p.features[kImageKey] = ProtoFeature::of_bytes({std::string(data, data + bytes.nbytes())});
  p.features[kFormatKey] = ProtoFeature::of_bytes({format_of(e.path)});
  p.features[kIdKey] = ProtoFeature::of_bytes({e.id});
  if (m.label_kind == LabelKind::index) {
    p.features[kLabelKey] = ProtoFeature::of_int64s({e.label});
    p.features["image/class/text"] = ProtoFeature::of_bytes({m.classes.at(e.label)});
  } else if (m.label_kind == LabelKind::one_hot) {
    p.features[kOneHotKey] = ProtoFeature::of_floats(e.one_hot);
  }
  return p;
}

// Shard index of each entry (in shuffled order): cut where the running size
// crosses a multiple of total / count, so shards come out nearly equal.
std::vector<int64_t> cut_into_shards(const std::vector<uint64_t>& sizes, double target_bytes, int64_t& count) {
  uint64_t total = 0;
  for (uint64_t s : sizes) total += s;
  count = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(total) / target_bytes)));
  count = std::min<int64_t>(count, static_cast<int64_t>(sizes.size()));
  std::vector<int64_t> shard(sizes.size());
  uint64_t before = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const double middle = static_cast<double>(before) + static_cast<double>(sizes[i]) / 2;
    shard[i] = std::min<int64_t>(count - 1, static_cast<int64_t>(middle * count / static_cast<double>(total)));
    before += sizes[i];
  }
  // A very large example can leave a shard empty: renumber the ones in use.
  std::vector<int64_t> renumber(count, -1);
  int64_t used = 0;
  for (int64_t& s : shard) {
    if (renumber[s] < 0) renumber[s] = used++;
    s = renumber[s];
  }
  count = used;
  return shard;
}

// The shard count in "<prefix>-DDDDD-of-DDDDD.tfrecord[.gz]", or -1 when
// `name` is not a shard of `prefix`.
int64_t shard_count_in(const std::string& name, const std::string& prefix) {
  const std::string_view rest = std::string_view(name).substr(std::min(name.size(), prefix.size()));
  auto digits = [](std::string_view d) { return std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; }); };
  if (!name.starts_with(prefix) || rest.size() < 24 || rest[0] != '-' || rest.substr(6, 4) != "-of-" ||
      !digits(rest.substr(1, 5)) || !digits(rest.substr(10, 5)) ||
      (rest.substr(15) != ".tfrecord" && rest.substr(15) != ".tfrecord.gz"))
    return -1;
  return std::stoll(std::string(rest.substr(10, 5)));
}

// Shards of an earlier run under the same prefix but another count would mix
// with these when read by a glob: refuse rather than delete someone's files.
void check_no_stale_shards(const ShardOptions& o, int64_t count) {
  std::error_code ec;
  for (const fs::directory_entry& f : fs::directory_iterator(o.out_dir, ec)) {
    const int64_t other = shard_count_in(f.path().filename().string(), o.prefix);
    if (other >= 0 && other != count)
      throw UserError(f.path().string() + ": shards of an earlier run (of " + std::to_string(other) +
                      ") are in the output folder and would mix with these " + std::to_string(count) +
                      "; remove them or choose another prefix");
  }
}

const char* label_kind_name(LabelKind k) {
  switch (k) {
    case LabelKind::none: return "none";
    case LabelKind::index: return "index";
    case LabelKind::one_hot: return "one_hot";
  }
  return "?";
}

// The sidecars, each as (path, content): classes.txt (when there are
// classes), then <prefix>-shards.json.
std::vector<std::pair<std::string, std::string>> sidecars(const Manifest& m, const ShardOptions& o,
                                                          const ShardsWritten& w) {
  std::vector<std::pair<std::string, std::string>> files;
  if (!m.classes.empty()) {
    std::string classes;
    for (const std::string& c : m.classes) classes += c + "\n";
    files.emplace_back((fs::path(o.out_dir) / "classes.txt").string(), classes);
  }
  nlohmann::json j;
  j["format"] = "tfrecord of tf.train.Example";
  j["compression"] = o.gzip ? "gzip" : "none";
  j["examples"] = w.examples;
  j["seed"] = o.seed;
  j["classes"] = m.classes;
  j["label_kind"] = label_kind_name(m.label_kind);
  j["keys"] = {{"image", kImageKey}, {"format", kFormatKey}, {"id", kIdKey}};
  if (m.label_kind == LabelKind::index) j["keys"]["label"] = kLabelKey;
  if (m.label_kind == LabelKind::one_hot) j["keys"]["label"] = kOneHotKey;
  for (const auto& s : w.shards)
    j["shards"].push_back({{"file", fs::path(s.file).filename().string()}, {"records", s.records}, {"bytes", s.bytes}});
  files.emplace_back((fs::path(o.out_dir) / (o.prefix + "-shards.json")).string(), j.dump(2) + "\n");
  return files;
}

// The shards of one call and their sidecars, written under temporary names
// and renamed into place (sidecars last) only once the last one is written:
// a failure part way (a full disk, an unreadable image, no room for the
// sidecars) removes the temporaries and leaves an earlier set under the
// same names whole, not new shards 0..k-1 beside old ones k.., nor a new
// set under the old -shards.json.
class StagedShards {
 public:
  StagedShards() = default;
  StagedShards(const StagedShards&) = delete;
  StagedShards& operator=(const StagedShards&) = delete;
  ~StagedShards() {
    std::error_code ec;
    for (std::size_t i = renamed_; i < staged_.size(); ++i) fs::remove(staged_[i], ec);
  }
  // The name to write `file` under until commit().
  const std::string& stage(const std::string& file) {
    staged_.push_back(temporary_name(file));
    listed_.push_back(std::make_unique<InFlightTemporary>(staged_.back()));  // listed before it exists
    finals_.push_back(file);
    return staged_.back();
  }
  void commit() {
    for (; renamed_ < staged_.size(); ++renamed_) {
      std::error_code ec;
      fs::rename(staged_[renamed_], finals_[renamed_], ec);
      require(!ec, finals_[renamed_] + ": cannot move the new shard into place (" + ec.message() + ")");
    }
  }

 private:
  std::vector<std::string> finals_, staged_;
  std::vector<std::unique_ptr<InFlightTemporary>> listed_;
  std::size_t renamed_ = 0;
};

}  // namespace

std::string shard_name(const std::string& prefix, int64_t index, int64_t count, bool gzip) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "-%05lld-of-%05lld", static_cast<long long>(index),
                static_cast<long long>(count));
  return prefix + digits + (gzip ? ".tfrecord.gz" : ".tfrecord");
}

ShardsWritten write_shards(const Manifest& manifest, const ShardOptions& o) {
  if (!(o.shard_mb > 0)) {
    char mb[32];
    std::snprintf(mb, sizeof mb, "%g", o.shard_mb);
    throw UserError(std::string("shards: the shard size must be positive, got ") + mb + " MB");
  }
  // The prefix names the shards in -shards.json, which holds UTF-8 text only.
  require(!o.prefix.empty() && o.prefix.find('/') == std::string::npos && valid_utf8(o.prefix) &&
              !holds_control_bytes(o.prefix),
          "shards: the prefix '" + shown(o.prefix) + "' must be a non-empty file name in UTF-8 without '/' or "
          "control bytes");
  require(!manifest.entries.empty(), "shards: the manifest lists no images");
  std::vector<std::string> outputs = {"classes.txt", o.prefix + "-shards.json"};
  std::optional<io::FolderGuard> folder;  // made once the shard names are known, before anything is written

  std::vector<int64_t> order(manifest.entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  Rng rng(o.seed);
  shuffle(order, rng);
  Manifest shuffled{manifest.classes, manifest.label_kind, {}, {}};
  std::vector<uint64_t> sizes;
  for (int64_t i : order) {
    const ManifestEntry& e = manifest.entries[i];
    std::error_code ec;
    const uint64_t size = fs::file_size(e.path, ec);
    require(!ec, e.path + " (" + e.where + "): cannot read the image (" + ec.message() + ")");
    sizes.push_back(size + e.id.size() + kRecordOverhead);
    shuffled.entries.push_back(e);
  }
  int64_t count = 0;
  const std::vector<int64_t> shard_of = cut_into_shards(sizes, o.shard_mb * 1e6, count);
  check_no_stale_shards(o, count);
  // A failure (a full disk, an unreadable image) leaves the folder as it was:
  // no partial set of shards, no sidecar, and no folder this call made.
  for (int64_t s = 0; s < count; ++s) outputs.push_back(shard_name(o.prefix, s, count, o.gzip));
  // Every name the set takes, before anything is written: a folder or link
  // in the way of shard k failed its rename after shards 0..k-1 had replaced
  // the earlier set's, leaving two sets mixed under one -shards.json.
  for (const std::string& name : outputs)
    io::require_replaceable((fs::path(o.out_dir) / name).string(), "move it away, or choose another --out or --prefix");
  folder.emplace(o.out_dir, std::vector<std::string>{}, outputs);
  io::ensure_writable_dir(o.out_dir);

  ShardsWritten written;
  {
    StagedShards staged;  // destroyed before `folder`, so a folder this call made is empty again by then
    std::unique_ptr<TfRecordWriter> writer;  // destroyed unclosed on an error: its temp file goes too
    auto finish = [&] {
      if (!writer) return;
      writer->close();
      written.shards.back().records = writer->records();
      written.shards.back().bytes = writer->bytes_written();
      writer.reset();
    };
    int64_t i = 0;
    for (data::Example& e : manifest_dataset(shuffled, {.read_bytes = true}).epoch(0)) {
      const int64_t s = shard_of[i];
      if (static_cast<int64_t>(written.shards.size()) <= s) {
        finish();
        const std::string file = (fs::path(o.out_dir) / shard_name(o.prefix, s, count, o.gzip)).string();
        writer = std::make_unique<TfRecordWriter>(staged.stage(file), o.gzip ? Compression::gzip : Compression::none);
        written.shards.push_back({file, 0, 0});
      }
      writer->write(encode_example(record_of(shuffled, shuffled.entries[i], e.tensor("image_bytes"))));
      ++i;
    }
    finish();
    written.examples = i;
    // Staged too (each through an atomic write onto its staged name), so
    // that every write that can fail is done before the first rename.
    for (const auto& [path, content] : sidecars(manifest, o, written)) io::write_file_atomic(staged.stage(path), content);
    staged.commit();
  }
  return written;
}

}  // namespace convoy::records
