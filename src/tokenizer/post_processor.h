// Post-processors of tokenizer.json ("post_processor"), used by encode(add_special_tokens=true)
// for a single sequence: ByteLevel (adds nothing), TemplateProcessing ("single" template),
// BertProcessing / RobertaProcessing ([cls] A [sep]), Sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace mamba::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  /// Rewrites the ids of one sequence, adding the special tokens.
  virtual void process(std::vector<std::int32_t>& ids) const = 0;
};

/// A template: each item is either the sequence itself or a list of special-token ids.
class TemplatePostProcessor final : public PostProcessor {
 public:
  struct Item {
    bool is_sequence = false;
    std::vector<std::int32_t> ids;  ///< the special token's ids (when !is_sequence)
  };
  explicit TemplatePostProcessor(std::vector<Item> items) : items_(std::move(items)) {}
  void process(std::vector<std::int32_t>& ids) const override;

 private:
  std::vector<Item> items_;
};

class NoopPostProcessor final : public PostProcessor {
 public:
  void process(std::vector<std::int32_t>&) const override {}
};

class SequencePostProcessor final : public PostProcessor {
 public:
  explicit SequencePostProcessor(std::vector<std::unique_ptr<PostProcessor>> items) : items_(std::move(items)) {}
  void process(std::vector<std::int32_t>& ids) const override {
    for (const auto& p : items_) p->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> items_;
};

}  // namespace mamba::tok
