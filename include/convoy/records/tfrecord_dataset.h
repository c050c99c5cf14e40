#pragma once
// A Dataset over TFRecord files of tf.train.Example records, as
// tf.data.TFRecordDataset + parse_single_example for image classification:
//
//   auto ds = records::tfrecord_dataset({"shards/train-00000-of-00002.tfrecord",
//                                        "shards/train-00001-of-00002.tfrecord"});
//   // each example: image_bytes u8 [n] (the encoded JPEG/PNG), label i32 [] or
//   // f32 [classes], id and file texts; decode with a map.
//
// Files are interleaved, `cycle_length` at a time, one record from each in
// turn (a fixed order); each open file is read ahead on its own thread, so
// CRC checks, inflating and parsing run in parallel across shards.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "convoy/data/bad_examples.h"
#include "convoy/data/dataset.h"
#include "convoy/records/tfrecord.h"

namespace convoy::records {

// The keys `convoy shards` writes and tfrecord_dataset reads by default.
inline constexpr const char* kImageKey = "image/encoded";       // bytes: the encoded image file
inline constexpr const char* kLabelKey = "image/class/label";   // int64: class index
inline constexpr const char* kOneHotKey = "image/class/one_hot";  // float list: one value per class
inline constexpr const char* kIdKey = "image/id";               // bytes: the example's id (e.g. image_id)
inline constexpr const char* kFormatKey = "image/format";       // bytes: "jpeg" or "png"

struct TfRecordOptions {
  Compression compression = Compression::detect;
  // Record feature → example feature. An empty key is not read.
  std::string image_key = kImageKey;  // bytes → `image_bytes` u8 [n]
  // The first of these present is the label: int64 (one value) → `label` i32
  // [], float list → `label` f32 [n].
  std::vector<std::string> label_keys = {kLabelKey, kOneHotKey};
  bool require_label = true;          // false for unlabeled (test) shards: no `label` feature
  std::string id_key = kIdKey;        // bytes → `id` text; when absent, "<file>:<record>"
  // Further keys copied under their own names (bytes → u8 [n], int64 → i32
  // [n], float → f32 [n]); a record without one is bad.
  std::vector<std::string> extra_keys;

  data::OnBadExample on_bad_example = data::OnBadExample::fail;
  int64_t cycle_length = 4;       // files read at once (at most the number of files)
  int64_t read_ahead = 16;        // records buffered per open file on its thread; 0: no threads
  // Shared with the caller: under `skip`, the records left out (counted and
  // named; one log line at the end of each epoch that skipped any).
  std::shared_ptr<data::SkippedExamples> skipped = std::make_shared<data::SkippedExamples>();
  data::LogFn log = data::stderr_log();
};

// Checks that every file exists now; reading errors surface while iterating.
data::Dataset tfrecord_dataset(std::vector<std::string> files, TfRecordOptions options = {});

// The examples of one record, by `options`' keys; throws UserError (without
// file context) when a key is missing or has the wrong type.
data::Example example_from_record(std::string_view record, const TfRecordOptions& options);

}  // namespace convoy::records
