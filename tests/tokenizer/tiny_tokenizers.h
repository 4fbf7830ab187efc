// Small tokenizer.json documents built in code for unit tests (no ../shared needed).
#pragma once

#include <string>

namespace mamba::test {

/// Byte-level BPE: vocab = the 256 byte characters (id = byte) + a few merges ("Ġt", "he",
/// "Ġthe", "in", "ing"), added tokens <|endoftext|> (special) and "  " (normalized), NFC,
/// ByteLevel pre-tokenizer and decoder.
std::string tiny_byte_level_json();

/// SentencePiece-style BPE: <unk>, <s>, </s>, <0x00>..<0xFF>, "▁", a-z, "▁a", "ab";
/// Metaspace (prepend_scheme first) + byte_fallback, decoder Metaspace/ByteFallback/Fuse,
/// TemplateProcessing "<s> $A".
std::string tiny_metaspace_json();

}  // namespace mamba::test
