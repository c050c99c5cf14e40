// zip: one example from each dataset, their features side by side.
#include "convoy/core/error.h"
#include "convoy/data/dataset.h"

namespace convoy::data {
namespace {

class ZipIterator final : public Iterator {
 public:
  explicit ZipIterator(std::vector<std::unique_ptr<Iterator>> inputs) : inputs_(std::move(inputs)) {}
  std::optional<Example> next() override {
    Example out;
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      auto e = inputs_[i]->next();
      if (!e) return std::nullopt;  // the shortest ends the zip
      // Plain pairs, not structured bindings: clang 14 (the fuzz build) cannot capture those.
      for (auto& feature : e->tensors())
        add(out, feature.first, i, [&] { out.set(feature.first, feature.second); });
      for (auto& feature : e->text_features())
        add(out, feature.first, i, [&] { out.set_texts(feature.first, feature.second); });
    }
    return out;
  }

 private:
  template <typename Set>
  static void add(const Example& out, const std::string& name, std::size_t input, Set set) {
    require(!out.has(name), "zip: feature '" + name + "' of dataset " + std::to_string(input) +
                                " is already given by an earlier dataset; rename it in a map before zip");
    set();
  }
  std::vector<std::unique_ptr<Iterator>> inputs_;
};

}  // namespace

Dataset Dataset::zip(std::vector<Dataset> datasets) {
  require(!datasets.empty(), "zip: no datasets given; pass at least one");
  return Dataset([datasets = std::move(datasets)](int64_t epoch) {
    std::vector<std::unique_ptr<Iterator>> inputs;
    for (const Dataset& d : datasets) inputs.push_back(d.iterate(epoch));
    return std::make_unique<ZipIterator>(std::move(inputs));
  });
}

}  // namespace convoy::data
