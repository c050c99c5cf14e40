// tfrecord_dataset: one iterator per file reads records and turns each
// tf.train.Example into a data::Example; an interleave cycles over the files.
#include "convoy/records/tfrecord_dataset.h"

#include <cstring>
#include <filesystem>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/records/example_proto.h"

namespace convoy::records {
namespace {

constexpr const char* kSkipAdvice = "re-create the file or set on_bad_example: skip";

std::string keys_of(const ExampleProto& proto) {
  std::string keys;
  for (const auto& [key, f] : proto.features) {
    if (keys.size() > 4 * kShownChars) return keys + ", ... (" + std::to_string(proto.features.size()) + " in all)";
    keys += (keys.empty() ? "" : ", ") + shown(key);
  }
  return keys.empty() ? "none" : keys;
}

const ProtoFeature& feature(const ExampleProto& proto, const std::string& key, ProtoFeature::Kind kind) {
  auto it = proto.features.find(key);
  require(it != proto.features.end(),
          "has no feature '" + key + "' (it has: " + keys_of(proto) + "); name the key the file uses in the options");
  require(it->second.kind == kind, "feature '" + key + "' is a " + kind_name(it->second.kind) + ", expected a " +
                                       kind_name(kind));
  return it->second;
}

Tensor label_tensor(const std::string& key, const ProtoFeature& f) {
  if (f.kind == ProtoFeature::Kind::int64s) {
    require(f.int64s.size() == 1, "label feature '" + key + "' holds " + std::to_string(f.int64s.size()) +
                                      " integers; a class index is exactly one");
    const int64_t v = f.int64s[0];
    require(v >= 0 && v <= INT32_MAX, "label feature '" + key + "' holds class " + std::to_string(v) +
                                          ", which is not a valid class index");
    Tensor t(DType::i32, {});
    t.data<int32_t>()[0] = static_cast<int32_t>(v);
    return t;
  }
  require(f.kind == ProtoFeature::Kind::floats && !f.floats.empty(),
          "label feature '" + key + "' is a " + kind_name(f.kind) +
              " (or empty); expected an int64 class index or a float one-hot list");
  Tensor t(DType::f32, {static_cast<int64_t>(f.floats.size())});
  std::copy(f.floats.begin(), f.floats.end(), t.data<float>().begin());
  return t;
}

class RecordFileIterator final : public data::Iterator {
 public:
  RecordFileIterator(std::string path, std::shared_ptr<const TfRecordOptions> options, int64_t epoch)
      : path_(std::move(path)), options_(std::move(options)), epoch_(epoch) {}

  std::optional<data::Example> next() override {
    for (;;) {
      if (done_) return std::nullopt;
      try {
        if (!reader_) reader_ = std::make_unique<TfRecordReader>(path_, options_->compression);
        if (!reader_->next(record_)) {
          done_ = true;
          return std::nullopt;
        }
        return to_example();
      } catch (const BadRecord& e) {
        skip_or_fail(e.problem());
      }
    }
  }

 private:
  data::Example to_example() {
    try {
      data::Example e = example_from_record(record_, *options_);
      if (!e.has("id")) e.set_text("id", path_ + ":" + std::to_string(reader_->record_index()));
      e.set_text("file", reader_->record_name());
      return e;
    } catch (const UserError& e) {
      throw BadRecord(reader_->record_name() + ": " + e.what(), kSkipAdvice);
    }
  }

  // Fail with the advice to skip, or skip: the next record when the file's
  // framing survived, else the rest of the file.
  void skip_or_fail(const std::string& problem) {
    if (options_->on_bad_example == data::OnBadExample::fail) {
      done_ = true;
      throw BadRecord(problem, kSkipAdvice);
    }
    const bool resumable = reader_ && reader_->can_continue();
    options_->skipped->add(epoch_, resumable ? problem : problem + " (rest of the file skipped)");
    if (!resumable) done_ = true;
  }

  std::string path_;
  std::shared_ptr<const TfRecordOptions> options_;
  int64_t epoch_;
  std::unique_ptr<TfRecordReader> reader_;  // opened on first use, so errors come in order
  std::string record_;
  bool done_ = false;
};

}  // namespace

data::Example example_from_record(std::string_view record, const TfRecordOptions& options) {
  const ExampleProto proto = decode_example(record);
  data::Example out;
  if (!options.image_key.empty()) {
    const ProtoFeature& image = feature(proto, options.image_key, ProtoFeature::Kind::bytes);
    require(image.bytes.size() == 1, "feature '" + options.image_key + "' holds " +
                                         std::to_string(image.bytes.size()) + " byte strings; an image is exactly one");
    Tensor bytes(DType::u8, {static_cast<int64_t>(image.bytes[0].size())});
    std::memcpy(bytes.raw(), image.bytes[0].data(), image.bytes[0].size());
    out.set("image_bytes", std::move(bytes));
  }
  bool labeled = false;
  for (const std::string& key : options.label_keys) {
    auto it = proto.features.find(key);
    if (it == proto.features.end()) continue;
    out.set("label", label_tensor(key, it->second));
    labeled = true;
    break;
  }
  if (options.require_label && !labeled) {
    std::string wanted;
    for (const std::string& key : options.label_keys) wanted += (wanted.empty() ? "'" : ", '") + key + "'";
    throw UserError("has no label feature " + wanted + " (it has: " + keys_of(proto) +
                    "); name the label key the file uses, or read it as unlabeled");
  }
  if (!options.id_key.empty()) {
    if (auto it = proto.features.find(options.id_key); it != proto.features.end()) {
      const ProtoFeature& id = feature(proto, options.id_key, ProtoFeature::Kind::bytes);
      require(id.bytes.size() == 1, "feature '" + options.id_key + "' holds " + std::to_string(id.bytes.size()) +
                                        " byte strings; an id is exactly one");
      out.set_text("id", id.bytes[0]);
    }
  }
  for (const std::string& key : options.extra_keys) {
    require(proto.features.count(key) > 0,
            "has no feature '" + key + "' (it has: " + keys_of(proto) + "); drop it from extra_keys");
    ExampleProto one;
    one.features[key] = proto.features.at(key);
    const data::Example converted = to_data_example(one);
    for (const auto& [name, t] : converted.tensors()) out.set(name, t);
  }
  return out;
}

data::Dataset tfrecord_dataset(std::vector<std::string> files, TfRecordOptions options) {
  require(!files.empty(), "tfrecord_dataset: no files given; pass at least one TFRecord file");
  for (const std::string& f : files) {
    std::error_code ec;
    require(std::filesystem::is_regular_file(f, ec), f + ": no such TFRecord file; check the path");
  }
  require(options.cycle_length >= 1, "tfrecord_dataset: cycle_length must be at least 1, got " +
                                         std::to_string(options.cycle_length));
  require(options.read_ahead >= 0, "tfrecord_dataset: read_ahead must be 0 or more, got " +
                                       std::to_string(options.read_ahead));
  if (!options.skipped) options.skipped = std::make_shared<data::SkippedExamples>();
  const int64_t cycle = std::min<int64_t>(options.cycle_length, static_cast<int64_t>(files.size()));
  auto shared = std::make_shared<const TfRecordOptions>(options);
  auto open_file = [shared](const data::Example& e) {
    const std::string path = e.text("file");
    data::Dataset records([shared, path](int64_t epoch) -> std::unique_ptr<data::Iterator> {
      return std::make_unique<RecordFileIterator>(path, shared, epoch);
    });
    return shared->read_ahead > 0 ? records.prefetch(shared->read_ahead) : records;
  };
  data::Dataset interleaved =
      data::Dataset::from_slices(data::Example().set_texts("file", std::move(files))).interleave(open_file, cycle);
  return data::log_skipped_at_epoch_end(std::move(interleaved), options.skipped, "record", options.log);
}

}  // namespace convoy::records
