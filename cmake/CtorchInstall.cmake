include(CMakePackageConfigHelpers)
install(TARGETS ctorch_static ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS ctorch EXPORT ctorchTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/ctorch DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ctorchTargets NAMESPACE ctorch:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctorch)
configure_package_config_file(cmake/ctorchConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/ctorchConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctorch)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ctorchConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ctorchConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/ctorchConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ctorch)
configure_file(cmake/ctorch.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ctorch.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ctorch.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
