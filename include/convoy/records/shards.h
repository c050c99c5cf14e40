#pragma once
// Writes an image manifest (a CSV + image folder, or class folders) as
// TFRecord shards of tf.train.Example records that TensorFlow reads as is:
//
//   image/encoded        bytes   the image file, byte for byte (no re-encoding)
//   image/format         bytes   "jpeg" or "png" (from the file name)
//   image/id             bytes   the manifest's id
//   image/class/label    int64   class index (class-label manifests)
//   image/class/text     bytes   class name  (class-label manifests)
//   image/class/one_hot  float   one value per class (one-hot CSVs)
//
// Examples are shuffled across shards by `seed`; the number of shards is the
// smallest that keeps each near or under `shard_mb`. Files are named
// <prefix>-00000-of-00004.tfrecord (.tfrecord.gz when gzip), each written
// atomically; beside them classes.txt (one class per line, label order) and
// <prefix>-shards.json (counts, sizes, keys). On an error no shard of this
// run is left behind.
#include <cstdint>
#include <string>
#include <vector>

#include "convoy/records/manifest.h"

namespace convoy::records {

struct ShardOptions {
  std::string out_dir;
  std::string prefix = "train";
  double shard_mb = 100;  // target shard size, in megabytes (10^6 bytes), before compression
  uint64_t seed = 0;
  bool gzip = false;
};

struct ShardsWritten {
  struct Shard {
    std::string file;
    int64_t records = 0;
    uint64_t bytes = 0;  // uncompressed TFRecord bytes
  };
  std::vector<Shard> shards;
  int64_t examples = 0;
};

ShardsWritten write_shards(const Manifest& manifest, const ShardOptions& options);

// "<prefix>-<index>-of-<count>.tfrecord[.gz]", five digits each.
std::string shard_name(const std::string& prefix, int64_t index, int64_t count, bool gzip);

}  // namespace convoy::records
