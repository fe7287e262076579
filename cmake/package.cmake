# ember as an installed CMake package: `cmake --install build --prefix P` puts the libraries in P/lib, the
# public headers in P/include/ember/<folder>/ and the package in P/lib/cmake/ember, so that a consumer writes
#   find_package(ember 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE ember::ember)
# and includes <ember/ember.h> (the whole API) or <ember/core/tensor.h> and the like. The headers name each
# other from the repository root ("core/tensor.h"), so the target puts P/include/ember on the path beside
# P/include, as LibTorch does for its own nested include root.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The libraries of the package, bottom up (bench/, apps/, tests/ and emu/ are the build's own).
set(EMBER_PACKAGE_LIBRARIES ember_base ember_kernels ember_core ember_nn ember_formats ember_data ember_optim
    ember_distributed ember_models ember_train)

# ember::ember: everything a user of the library links.
add_library(ember_library INTERFACE)
set_target_properties(ember_library PROPERTIES EXPORT_NAME ember)
target_link_libraries(ember_library INTERFACE ${EMBER_PACKAGE_LIBRARIES})
target_include_directories(ember_library INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
add_library(ember::ember ALIAS ember_library)

if(EMBER_SANITIZE OR EMBER_CUDA_EMULATED)
  # Their libraries need the sanitizer runtime or the emulator, neither of which is part of the package.
  message(STATUS "ember: no install rules in a sanitizer or emulated build")
  return()
endif()

foreach(lib IN LISTS EMBER_PACKAGE_LIBRARIES)
  target_include_directories(${lib} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/ember>)
endforeach()
set(EMBER_PACKAGE_TARGETS ${EMBER_PACKAGE_LIBRARIES} ember_library)
if(EMBER_HAS_CUDA)
  list(APPEND EMBER_PACKAGE_TARGETS ember_cuda_runtime)  # linked privately: cudart and cuBLAS at link time only
endif()
install(TARGETS ${EMBER_PACKAGE_TARGETS} EXPORT emberTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ember RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Public headers: every header of the package's folders but the CUDA ones (kernels/cuda/, base/cuda_check.h),
# so that a consumer compiles without CUDA headers. tests/package checks that each one compiles that way.
foreach(folder base kernels core nn formats data optim distributed models train)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember/${folder}
          FILES_MATCHING PATTERN "*.h" PATTERN "cuda" EXCLUDE PATTERN "cuda_check.h" EXCLUDE)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/ember.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember)
install(FILES ${PROJECT_BINARY_DIR}/generated/base/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember/base)

set(EMBER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
install(EXPORT emberTargets NAMESPACE ember:: DESTINATION ${EMBER_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/emberConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/emberConfig.cmake INSTALL_DESTINATION ${EMBER_CMAKE_DIR})
# 0.x: a minor version may break the API, so only the same minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/emberConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/emberConfig.cmake ${PROJECT_BINARY_DIR}/emberConfigVersion.cmake
        DESTINATION ${EMBER_CMAKE_DIR})
