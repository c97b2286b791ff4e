# @brief Per-target defaults (no global flags): warnings, NDEBUG for release LibTorch, hidden symbols.
function(cudal1_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  # Release LibTorch changes struct layouts under NDEBUG (RecordFunction); always match it.
  target_compile_definitions(${target} PRIVATE NDEBUG)
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()
