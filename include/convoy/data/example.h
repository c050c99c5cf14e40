#pragma once
// An example: a few named features. Tensor features hold numbers (an `image`
// u8/f32 in CHW or HWC, a `label` i32 scalar or a one-hot/multi-hot vector);
// text features hold strings (an `id`, a `file`). A batch is an example too:
// its tensors gain a leading batch dimension and each text feature holds one
// string per row.
//
// Every example a Dataset hands out owns its tensors (no storage is shared
// with a cache or a source), so a map may change pixels in place.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "convoy/core/tensor.h"

namespace convoy::data {

class Example {
 public:
  using TensorFeature = std::pair<std::string, Tensor>;
  using TextFeature = std::pair<std::string, std::vector<std::string>>;

  // Adds or replaces a feature; returns *this so sources read as a list.
  Example& set(std::string name, Tensor value);
  Example& set_text(std::string name, std::string value);
  Example& set_texts(std::string name, std::vector<std::string> values);

  bool has(std::string_view name) const;
  // Throw UserError naming the missing feature and the ones there are.
  const Tensor& tensor(std::string_view name) const;
  Tensor& tensor(std::string_view name);
  const std::vector<std::string>& texts(std::string_view name) const;
  const std::string& text(std::string_view name) const;  // the first string

  const std::vector<TensorFeature>& tensors() const { return tensors_; }
  const std::vector<TextFeature>& text_features() const { return texts_; }

  // "{image: u8 [1, 28, 28], label: i32 [], id: text}" for error messages.
  std::string describe() const;

 private:
  std::vector<TensorFeature> tensors_;
  std::vector<TextFeature> texts_;
};

// A tensor with its own copy of `t`'s data.
Tensor copy_of(const Tensor& t);
// An example whose tensors own copies of `e`'s data.
Example deep_copy(const Example& e);

}  // namespace convoy::data
