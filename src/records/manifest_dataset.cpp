// manifest_dataset: one example per manifest entry, its image file read into
// memory by the source so that decoding can be a pure (parallel) map.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "convoy/core/error.h"
#include "convoy/records/manifest.h"

namespace convoy::records {
namespace {

// The whole file as u8 [size]; throws UserError naming the entry.
Tensor read_bytes(const ManifestEntry& e) {
  std::FILE* f = std::fopen(e.path.c_str(), "rb");
  auto fail = [&](const char* doing) {
    const std::string reason = std::strerror(errno);
    if (f) std::fclose(f);
    throw UserError(e.path + " (" + e.where + "): cannot " + doing + " the image (" + reason + ")");
  };
  if (!f) fail("open");
  if (std::fseek(f, 0, SEEK_END) != 0) fail("read");
  const long size = std::ftell(f);
  if (size < 0 || std::fseek(f, 0, SEEK_SET) != 0) fail("read");
  Tensor bytes(DType::u8, {size});
  if (std::fread(bytes.raw(), 1, static_cast<std::size_t>(size), f) != static_cast<std::size_t>(size)) fail("read");
  std::fclose(f);
  return bytes;
}

Tensor label_of(const Manifest& m, const ManifestEntry& e) {
  if (m.label_kind == LabelKind::index) {
    Tensor t(DType::i32, {});
    t.data<int32_t>()[0] = e.label;
    return t;
  }
  Tensor t(DType::f32, {static_cast<int64_t>(e.one_hot.size())});
  std::copy(e.one_hot.begin(), e.one_hot.end(), t.data<float>().begin());
  return t;
}

struct Shared {
  Manifest manifest;
  ManifestDatasetOptions options;
};

class ManifestIterator final : public data::Iterator {
 public:
  ManifestIterator(std::shared_ptr<const Shared> shared, int64_t epoch) : shared_(std::move(shared)), epoch_(epoch) {}

  std::optional<data::Example> next() override {
    const auto& entries = shared_->manifest.entries;
    while (i_ < entries.size()) {
      const ManifestEntry& e = entries[i_++];
      data::Example out;
      if (shared_->options.read_bytes) {
        try {
          out.set("image_bytes", read_bytes(e));
        } catch (const UserError& err) {
          if (shared_->options.on_bad_example == data::OnBadExample::fail)
            throw UserError(std::string(err.what()) + "; restore the file or set on_bad_example: skip");
          shared_->options.skipped->add(epoch_, err.what());
          continue;
        }
      }
      if (shared_->manifest.label_kind != LabelKind::none) out.set("label", label_of(shared_->manifest, e));
      out.set_text("id", e.id);
      out.set_text("file", e.path);
      return out;
    }
    return std::nullopt;
  }

 private:
  std::shared_ptr<const Shared> shared_;
  int64_t epoch_;
  std::size_t i_ = 0;
};

}  // namespace

data::Dataset manifest_dataset(Manifest manifest, ManifestDatasetOptions options) {
  if (!options.skipped) options.skipped = std::make_shared<data::SkippedExamples>();
  auto skipped = options.skipped;
  data::LogFn log = options.log;
  auto shared = std::make_shared<const Shared>(Shared{std::move(manifest), std::move(options)});
  data::Dataset source([shared](int64_t epoch) { return std::make_unique<ManifestIterator>(shared, epoch); });
  return data::log_skipped_at_epoch_end(std::move(source), std::move(skipped), "image", std::move(log));
}

}  // namespace convoy::records
