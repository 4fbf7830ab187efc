#include "tokenizer/post_processor.h"

namespace mamba::tok {

void TemplatePostProcessor::process(std::vector<std::int32_t>& ids) const {
  std::vector<std::int32_t> out;
  out.reserve(ids.size() + 4);
  for (const auto& item : items_) {
    if (item.is_sequence) {
      out.insert(out.end(), ids.begin(), ids.end());
    } else {
      out.insert(out.end(), item.ids.begin(), item.ids.end());
    }
  }
  ids = std::move(out);
}

}  // namespace mamba::tok
