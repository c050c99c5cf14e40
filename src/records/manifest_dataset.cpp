// manifest_dataset: one example per manifest entry, its image file read into
// memory by the source so that decoding can be a pure (parallel) map.
#include "convoy/core/error.h"
#include "convoy/image/codec.h"
#include "convoy/records/manifest.h"

namespace convoy::records {
namespace {

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
          out.set("image_bytes", image::read_image_file(e.path, shared_->options.max_image_bytes, e.where));
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
