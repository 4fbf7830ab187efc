# Server end-to-end tests (label server_e2e): node scripts in tests/server_e2e/ start a real
# mamba-server on a free loopback port (embedded model) and talk to it over HTTP, with curl-level
# requests and the npm clients in tests/node (openai, @huggingface/inference).
find_program(MAMBA_NODE node)
if(TARGET mamba-server AND MAMBA_NODE)
  foreach(t api clients concurrency lifecycle options resources)
    add_test(NAME server_e2e_${t} COMMAND ${MAMBA_NODE} ${PROJECT_SOURCE_DIR}/tests/server_e2e/${t}.mjs)
    set_tests_properties(server_e2e_${t} PROPERTIES
      LABELS server_e2e
      TIMEOUT 240
      RESOURCE_LOCK mamba_server_e2e
      SKIP_RETURN_CODE 77
      ENVIRONMENT "MAMBA_SERVER=$<TARGET_FILE:mamba-server>;MAMBA_NODE_DIR=${PROJECT_SOURCE_DIR}/tests/node")
  endforeach()
endif()
