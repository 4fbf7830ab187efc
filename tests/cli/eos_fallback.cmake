# A model whose config names no EOS (the original state-spaces checkpoints) stops at its
# tokenizer's: tokenizer_config.json's eos_token, else a special <|endoftext|>. Checked through the
# CLI's own call sites (inspect's label, run's generate()), on a copy of the embedded model without
# its EOS ids.
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
set(model ${SRC}/models/mamba2-books-7m-bpe8k)
set(copy ${WORK}/no-eos)
file(REMOVE_RECURSE ${copy})
file(MAKE_DIRECTORY ${copy})
file(CREATE_LINK ${model}/model.safetensors ${copy}/model.safetensors SYMBOLIC)
file(COPY ${model}/tokenizer.json DESTINATION ${copy})
file(READ ${model}/config.json cfg)
string(JSON cfg REMOVE "${cfg}" eos_token_id)
file(WRITE ${copy}/config.json "${cfg}")

# inspect: the special <|endoftext|> (id 0), labelled as the tokenizer's.
cli_run_ok(insp inspect ${copy})
if(NOT insp_OUT MATCHES "bos / eos / pad +0 / 0 \\(the tokenizer's\\) / 1")
  message(FATAL_ERROR "inspect of a model without EOS ids:\n${insp_OUT}")
endif()

# run: tokenizer_config.json's eos_token ends generation. Make it the token greedy decoding
# produces first, so that the run stops there with finish eos_token.
cli_run_ok(first run -m ${model} -p "Once" -n 1 --json --ignore-eos)
string(JSON first_id GET "${first_OUT}" ids 0)
string(JSON first_text GET "${first_OUT}" text)
cli_run_ok(tok tokenize -m ${model} --tokens -- "${first_text}")
if(NOT tok_OUT MATCHES "^${first_id}\\(([^)]+)\\)\n$")
  message(FATAL_ERROR "the first greedy token ${first_id} ('${first_text}') does not tokenize back to itself: ${tok_OUT}")
endif()
set(form "${CMAKE_MATCH_1}")
file(WRITE ${copy}/tokenizer_config.json "{\"eos_token\": {\"content\": \"${form}\", \"special\": false}}")
cli_run_ok(stop run -m ${copy} -p "Once" -n 8 --json)
string(JSON reason GET "${stop_OUT}" finish_reason)
string(JSON n LENGTH "${stop_OUT}" ids)
if(NOT reason STREQUAL "eos_token" OR NOT n EQUAL 1)
  message(FATAL_ERROR "run with tokenizer_config.json eos_token '${form}' (id ${first_id}): ${stop_OUT}")
endif()
cli_run_ok(insp2 inspect ${copy})
if(NOT insp2_OUT MATCHES "bos / eos / pad +0 / ${first_id} \\(the tokenizer's\\) / 1")
  message(FATAL_ERROR "inspect with tokenizer_config.json eos_token '${form}':\n${insp2_OUT}")
endif()
