# @brief cudal1_embed_device_source(): device code kept as a real .cuh file and embedded at build time as a C++
# string constant, for NVRTC to compile at run time (the generators prepend their typed constants).

# Embeds `cuh` (relative to the calling directory) into `<binary dir>/<name>.h` as
#   inline constexpr const char k<Name>[] = R"cudal1_cuh(...)cudal1_cuh";
# in namespace cudal1::device_sources, and adds that directory to `target`'s private include path. The header
# is regenerated when the .cuh changes.
function(cudal1_embed_device_source target cuh name constant)
  set(src ${CMAKE_CURRENT_SOURCE_DIR}/${cuh})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/embedded/${name}.h)
  file(READ ${src} body)
  string(FIND "${body}" ")cudal1_cuh\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${cuh} contains the raw-string delimiter )cudal1_cuh\"")
  endif()
  file(CONFIGURE OUTPUT ${out}
       CONTENT "// Generated from ${cuh} by cudal1_embed_device_source(); edit the .cuh.\n#pragma once\nnamespace cudal1::device_sources {\ninline constexpr const char ${constant}[] = R\"cudal1_cuh(@body@)cudal1_cuh\";\n}  // namespace cudal1::device_sources\n"
       @ONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src})
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/embedded)
endfunction()
