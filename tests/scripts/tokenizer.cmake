# Tokenizer script tests: `mamba-cli tokenize` end to end (ids of the GPT-NeoX reference case
# "Hello world" = 12092 1533, and the reverse with --decode). The npm differential test is the
# gtest TokenizerNpmDifferential.ZeroMismatches in test_tokenizer (it spawns node itself and skips
# with a message when node or tests/node/node_modules is absent, failing under CI=true).
set(_mamba_shared ${PROJECT_SOURCE_DIR}/../shared)
if(EXISTS ${_mamba_shared}/tokenizer/gpt-neox-20b.json)
  add_test(NAME cli_tokenize_encode
           COMMAND mamba-cli tokenize --tokenizer ${_mamba_shared}/tokenizer/gpt-neox-20b.json "Hello world")
  set_tests_properties(cli_tokenize_encode PROPERTIES LABELS "tokenizer;cli" PASS_REGULAR_EXPRESSION "^12092 1533\n$")
  add_test(NAME cli_tokenize_decode
           COMMAND mamba-cli tokenize --tokenizer ${_mamba_shared}/tokenizer/gpt-neox-20b.json --decode "12092, 1533")
  set_tests_properties(cli_tokenize_decode PROPERTIES LABELS "tokenizer;cli" PASS_REGULAR_EXPRESSION "^Hello world\n$")
  add_test(NAME cli_tokenize_bad_id
           COMMAND mamba-cli tokenize --tokenizer ${_mamba_shared}/tokenizer/gpt-neox-20b.json --decode 50277)
  # The error itself (WILL_FAIL alone passed on any failure, a crash included).
  set_tests_properties(cli_tokenize_bad_id PROPERTIES LABELS "tokenizer;cli" PASS_REGULAR_EXPRESSION
    "^error: decode: token id 50277 \\(position 0\\) is out of range: [^\n]*gpt-neox-20b.json defines ids 0..50276\n$")
endif()
if(EXISTS ${_mamba_shared}/models/mamba2-books-7m-bpe8k/tokenizer.json)
  add_test(NAME cli_tokenize_model_dir
           COMMAND mamba-cli tokenize --model ${_mamba_shared}/models/mamba2-books-7m-bpe8k --decode 0)
  set_tests_properties(cli_tokenize_model_dir PROPERTIES LABELS "tokenizer;cli" PASS_REGULAR_EXPRESSION "^<\\|endoftext\\|>\n$")
endif()
