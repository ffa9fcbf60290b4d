# Writes a man page from a program's hidden --help-man option (the same option table as its --help).
#   cmake -DPROGRAM=path/to/exe -DOUT=file.1 -P man.cmake
execute_process(COMMAND ${PROGRAM} --help-man OUTPUT_FILE ${OUT}.tmp RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}.tmp)
  message(FATAL_ERROR "${PROGRAM} --help-man failed (${rc}): ${err}")
endif()
file(RENAME ${OUT}.tmp ${OUT})
