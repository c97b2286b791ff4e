# @brief Installs libcudal1.so, the cudal1 CLI, the public headers and the CMake package (find_package(cudal1)).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS cudal1_shared EXPORT cudal1Targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS cudal1_cli cudal1_warm RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES csrc/runtime/include/cudal1/cudal1.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cudal1)
install(EXPORT cudal1Targets NAMESPACE cudal1:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cudal1)
configure_package_config_file(cmake/cudal1Config.cmake.in
  "${CMAKE_CURRENT_BINARY_DIR}/cudal1Config.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cudal1)
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/cudal1ConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/cudal1Config.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/cudal1ConfigVersion.cmake"
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cudal1)
