# Stop strings: the text before the stop is kept, the stop text is never printed (also when it
# spans several tokens, and in the streamed stdout). Reference greedy text of the prompt:
# ".\n\n“I’m glad to see you,” said the old man, ..."
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
set(model ${SRC}/models/mamba2-books-7m-bpe8k)
set(prompt "It was a dark and stormy night")
# The exact tier throughout: the reference greedy text is HF transformers' (the default, auto, may
# compute this bf16 model in the bf16 tier).
# "d to s" spans the tokens " glad", " to", " see".
cli_run_ok(a run -m ${model} -p "${prompt}" --precision exact -n 32 --stop "d to s")
set(want ".\n\n“I’m gla")
if(NOT a_OUT STREQUAL want)
  message(FATAL_ERROR "streamed stdout with --stop 'd to s': [${a_OUT}], expected [${want}]")
endif()
if(NOT a_ERR MATCHES "finish: stop_sequence")
  message(FATAL_ERROR "finish reason should be stop_sequence:\n${a_ERR}")
endif()
# Two stops: the earliest in the text wins; --json text agrees.
cli_run_ok(b run -m ${model} -p "${prompt}" --precision exact -n 32 --stop "old man" --stop "see" --json)
string(JSON text GET "${b_OUT}" text)
string(JSON finish GET "${b_OUT}" finish_reason)
set(want ".\n\n“I’m glad to ")
if(NOT text STREQUAL want OR NOT finish STREQUAL "stop_sequence")
  message(FATAL_ERROR "--json text [${text}] (${finish}), expected [${want}] (stop_sequence)")
endif()
# A stop string that never occurs changes nothing.
cli_run_ok(c run -m ${model} -p "${prompt}" --precision exact -n 32 --stop "zebra")
file(READ ${model}/reference.json ref)
string(JSON ref_text GET "${ref}" prompts 0 greedy_text)
if(NOT c_OUT STREQUAL ref_text)
  message(FATAL_ERROR "--stop zebra changed the output:\n[${c_OUT}]")
endif()
