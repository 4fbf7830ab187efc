# `mamba-cli inspect` end to end: sizes of a Mamba-2 fixture with n_groups 4 and biases, the
# tokenizer line of the embedded-style model, and a clear failure on a missing model.
set(_mamba_shared ${PROJECT_SOURCE_DIR}/../shared)
if(EXISTS ${_mamba_shared}/fixtures/mamba2-odd/model/config.json)
  add_test(NAME cli_inspect_mamba2_odd COMMAND mamba-cli inspect ${_mamba_shared}/fixtures/mamba2-odd/model)
  set_tests_properties(cli_inspect_mamba2_odd PROPERTIES LABELS "io;cli" PASS_REGULAR_EXPRESSION
    "architecture +mamba2 \\(HF format\\).*n_heads +8 × head_dim 12.*n_groups +4.*lm_head +untied.*parameters +151248 .*state / sequence 13056 .*no tokenizer.json")
  add_test(NAME cli_inspect_state_spaces COMMAND mamba-cli inspect ${_mamba_shared}/fixtures/mamba1-tiny-ssm/model)
  set_tests_properties(cli_inspect_state_spaces PROPERTIES LABELS "io;cli" PASS_REGULAR_EXPRESSION
    "architecture +mamba \\(state-spaces format\\).*dt_rank +2.*vocab +50277 \\(logits width 50280\\).*lm_head +tied")
endif()
if(EXISTS ${_mamba_shared}/models/mamba2-books-7m-bpe8k/tokenizer.json)
  add_test(NAME cli_inspect_tokenizer COMMAND mamba-cli inspect ${_mamba_shared}/models/mamba2-books-7m-bpe8k)
  set_tests_properties(cli_inspect_tokenizer PROPERTIES LABELS "io;cli" PASS_REGULAR_EXPRESSION
    "dtype +BF16.*parameters +7281696 .*tokenizer +8192 ids.*special tokens +0=<\\|endoftext\\|>, 1=<\\|padding\\|>")
endif()
add_test(NAME cli_inspect_missing_model COMMAND mamba-cli inspect /nonexistent/model/dir)
# The error itself (WILL_FAIL alone passed on any failure, a crash included).
set_tests_properties(cli_inspect_missing_model PROPERTIES LABELS "io;cli" PASS_REGULAR_EXPRESSION
  "^error: /nonexistent/model/dir: no such model directory \\(and not a Hugging Face repo id of the form \\[ORG/\\]NAME\\[@REVISION\\]\\)\n$")
