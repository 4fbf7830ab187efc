# --tokenizer gives a checkpoint without tokenizer.json (the state-spaces format) the tokenizer it
# was trained with: a file, a directory holding one, or a repo id in the HF hub cache. Text prompts
# then tokenize exactly as the ids would be given (GPT-NeoX: "Hello world" = 12092 1533), and a bad
# reference is an error naming it (exit 2), never the model's own tokenizer in its place.
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
require_shared()
set(model ${SHARED}/fixtures/mamba1-tiny-ssm/model)
set(tok ${SHARED}/tokenizer/gpt-neox-20b.json)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/dir ${WORK}/empty)
file(COPY_FILE ${tok} ${WORK}/dir/tokenizer.json)
# A hub cache holding EleutherAI/gpt-neox-20b's tokenizer only (as `hf download
# EleutherAI/gpt-neox-20b tokenizer.json` leaves it).
set(snap ${WORK}/hub/models--EleutherAI--gpt-neox-20b/snapshots/0123abc)
file(MAKE_DIRECTORY ${snap} ${WORK}/hub/models--EleutherAI--gpt-neox-20b/refs)
file(WRITE ${WORK}/hub/models--EleutherAI--gpt-neox-20b/refs/main "0123abc\n")
file(COPY_FILE ${tok} ${snap}/tokenizer.json)

cli_run_ok(ids run -m ${model} --prompt-ids 12092,1533 -n 6 --json)
string(JSON want GET "${ids_OUT}" ids)
foreach(ref ${tok} ${WORK}/dir)
  cli_run_ok(t run -m ${model} --tokenizer ${ref} -p "Hello world" -n 6 --json)
  string(JSON got_prompt GET "${t_OUT}" prompt_ids)
  string(JSON got GET "${t_OUT}" ids)
  string(REGEX REPLACE "[ \n]" "" got_prompt "${got_prompt}")
  if(NOT got_prompt STREQUAL "[12092,1533]" OR NOT got STREQUAL want)
    message(FATAL_ERROR "run --tokenizer ${ref}: prompt ids ${got_prompt} (want [12092,1533]), ids ${got} (want ${want})")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E env HF_HUB_CACHE=${WORK}/hub
                        ${CLI} run -t 1 -m ${model} --tokenizer EleutherAI/gpt-neox-20b -p "Hello world" -n 6 --json
                OUTPUT_VARIABLE hub_out ERROR_VARIABLE hub_err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "run --tokenizer EleutherAI/gpt-neox-20b (hub cache): exit ${rc}\n${hub_err}")
endif()
string(JSON got GET "${hub_out}" ids)
if(NOT got STREQUAL want)
  message(FATAL_ERROR "run --tokenizer EleutherAI/gpt-neox-20b: ids ${got}, want ${want}")
endif()

# The EOS fallback (no EOS in config.json / generation_config.json) comes from the given tokenizer's
# directory, not the model's: " world" (1533, the first token generated here) made the EOS in one
# tokenizer_config.json and the other in turn.
set(copy ${WORK}/model_with_cfg)
file(COPY ${model}/ DESTINATION ${copy})
file(WRITE ${copy}/tokenizer_config.json "{\"eos_token\": \"\\u0120world\"}")  # JSON's \u0120 = Ġ
cli_run_ok(m run -m ${copy} --tokenizer ${WORK}/dir -p "Hello world" -n 5 --json)
string(JSON fin GET "${m_OUT}" finish_reason)
if(NOT fin STREQUAL "length")
  message(FATAL_ERROR "the model directory's tokenizer_config.json named the EOS under --tokenizer DIR: finish ${fin}\n${m_OUT}")
endif()
file(COPY_FILE ${copy}/tokenizer_config.json ${WORK}/dir/tokenizer_config.json)
cli_run_ok(d run -m ${model} --tokenizer ${WORK}/dir -p "Hello world" -n 5 --json)
string(JSON fin GET "${d_OUT}" finish_reason)
string(JSON n LENGTH "${d_OUT}" ids)
if(NOT fin STREQUAL "eos_token" OR NOT n EQUAL 1)
  message(FATAL_ERROR "the tokenizer directory's tokenizer_config.json EOS was not used: finish ${fin}, ${n} ids\n${d_OUT}")
endif()
file(REMOVE ${WORK}/dir/tokenizer_config.json)

# perplexity and tokenize take it too.
file(WRITE ${WORK}/text.txt "Hello world, this is a test.")
cli_run_ok(p perplexity -m ${model} --tokenizer ${WORK}/dir -f ${WORK}/text.txt)
if(NOT p_OUT MATCHES "predictions: [1-9]")
  message(FATAL_ERROR "perplexity --tokenizer: ${p_OUT}\n${p_ERR}")
endif()
cli_run_ok(tk tokenize --tokenizer ${WORK}/dir "Hello world")
string(STRIP "${tk_OUT}" tk)
if(NOT tk STREQUAL "12092 1533")
  message(FATAL_ERROR "tokenize --tokenizer DIR: '${tk}'")
endif()

# Without --tokenizer, text input is refused naming the way to give one (and the ids alternative).
expect_error("error: ${model} has no tokenizer.json: give one with --tokenizer .*EleutherAI/gpt-neox-20b.*, or give the prompt as token ids with --prompt-ids"
             run -m ${model} -p hi -n 1)
expect_error("error: ${model} has no tokenizer.json: give one with --tokenizer .*, or use --ids-file" perplexity -m ${model} -f ${WORK}/text.txt)
expect_error("error: ${model}: the model has no tokenizer.json: give one with --tokenizer" tokenize -m ${model} hi)
# A text prompt on stdin (-f -, or none given) is not read before that check: with an endless stdin
# the error comes at once (it had read 1 GiB and then refused it as too large).
foreach(cmd "run;-n;1" "run;-f;-;-n;1" "perplexity;-f;-")
  execute_process(COMMAND ${CLI} ${cmd} -t 1 -m ${model} INPUT_FILE /dev/zero TIMEOUT 60
                  ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "error: ${model} has no tokenizer.json: give one with --tokenizer")
    message(FATAL_ERROR "${cmd} with an endless stdin and no tokenizer: exit ${rc}\n${err}")
  endif()
endforeach()

# Bad references: named, exit 2 (a dangling link by itself, not as a missing cached repo).
file(CREATE_LINK ${WORK}/nowhere ${WORK}/dangling.json SYMBOLIC)
expect_error("error: ${WORK}/dangling.json: symbolic link to ${WORK}/nowhere, which cannot be opened"
             run -m ${model} --tokenizer ${WORK}/dangling.json -p hi -n 1)
expect_error("error: ${WORK}/nowhere: no such tokenizer file or directory" run -m ${model} --tokenizer ${WORK}/nowhere -p hi -n 1)
expect_error("error: ${WORK}/empty: holds no tokenizer.json" run -m ${model} --tokenizer ${WORK}/empty -p hi -n 1)
expect_error("error: ${WORK}/empty: holds no tokenizer.json" perplexity -m ${model} --tokenizer ${WORK}/empty -f ${WORK}/text.txt)
# (execute_process directly: a list expansion would drop the empty argument.)
execute_process(COMMAND ${CLI} run -t 1 -m ${model} --tokenizer "" -p hi -n 1 ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "error: --tokenizer: must not be empty")
  message(FATAL_ERROR "run --tokenizer '': exit ${rc}\n${err}")
endif()
# tokenize takes --tokenizer beside -m, as run does (the hint for a model without tokenizer.json
# says to add it): the given tokenizer's ids; the model must still exist.
cli_run_ok(tk tokenize -m ${model} --tokenizer ${tok} "Hello world")
if(NOT tk_OUT STREQUAL "12092 1533\n")
  message(FATAL_ERROR "tokenize -m ${model} --tokenizer ${tok}: '${tk_OUT}' (want 12092 1533)")
endif()
cli_run(tkm tokenize -m ${WORK}/no-such-model --tokenizer ${tok} "Hello world")
if(tkm_RC EQUAL 0 OR NOT tkm_ERR MATCHES "no-such-model")
  message(FATAL_ERROR "tokenize with a missing -m and --tokenizer must fail naming the model: ${tkm_RC} ${tkm_ERR}")
endif()
