# install(EXPORT) and the config package: find_package(tessera) then link tessera::tessera.
include(CMakePackageConfigHelpers)
install(TARGETS tessera EXPORT tesseraTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/tessera DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tesseraTargets NAMESPACE tessera:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
configure_package_config_file(cmake/tesseraConfig.cmake.in "${CMAKE_CURRENT_BINARY_DIR}/tesseraConfig.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/tesseraConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/tesseraConfig.cmake" "${CMAKE_CURRENT_BINARY_DIR}/tesseraConfigVersion.cmake"
  cmake/TesseraDependencies.cmake cmake/TesseraExperiment.cmake cmake/experiment_main.cpp.in
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tessera)
