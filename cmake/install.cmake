# `cmake --install build --prefix P`: convoy as a library others can use.
#
#   P/include/convoy/**                 the public headers (standard headers only)
#   P/lib/libconvoy.a                   the library (convoy_lib), static
#   P/bin/convoy                        the CLI
#   P/lib/cmake/convoy/                 find_package(convoy) -> convoy::convoy
#   P/lib/pkgconfig/convoy.pc           pkg-config --cflags --libs convoy
#
# The library stays static: the CLI, tests and benchmarks link the same
# archive, nothing needs -fPIC (nvcc's objects included), and there is no
# shared-library ABI to keep. Its users then link what it links: the CMake
# package finds those dependencies (convoyConfig.cmake.in) and convoy.pc names
# them. Included last by CMakeLists.txt, when convoy_lib's links are final.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(convoy_lib PROPERTIES OUTPUT_NAME convoy EXPORT_NAME convoy)
target_compile_features(convoy_lib INTERFACE cxx_std_20)  # the headers' language
# The installed CLI keeps the library folders it was linked with (CUDA's,
# Open MPI's) in its run path, as the one in the build tree has them.
set_target_properties(convoy PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

# --- What an installed convoy_lib tells its users --------------------------
# The build tree's usage requirements hold paths and targets that mean
# nothing outside it; the installed package gets its own for those entries:
#   include/ (a source path)      -> P/include
#   nlohmann_json (header-only, private to the .cpp files) -> nothing
#   PkgConfig::CAIRO (cannot be exported) -> convoy::cairo, made by the config file
#   cuDNN's path                  -> convoy::cudnn, found again by the config file
get_target_property(_convoy_includes convoy_lib INTERFACE_INCLUDE_DIRECTORIES)
list(TRANSFORM _convoy_includes REPLACE "^${PROJECT_SOURCE_DIR}/include$"
     "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
set_target_properties(convoy_lib PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_convoy_includes}")

get_target_property(_convoy_links convoy_lib INTERFACE_LINK_LIBRARIES)
# Installed, the entry `from` (bare or as $<LINK_ONLY:from>) reads `to`; an empty `to` drops it.
function(_convoy_installed_as from to)
  set(_links)
  foreach(_item IN LISTS _convoy_links)
    if(_item STREQUAL from OR _item STREQUAL "$<LINK_ONLY:${from}>")
      set(_item "$<LINK_ONLY:$<BUILD_INTERFACE:${from}>$<INSTALL_INTERFACE:${to}>>")
    endif()
    list(APPEND _links "${_item}")
  endforeach()
  set(_convoy_links ${_links} PARENT_SCOPE)
endfunction()
_convoy_installed_as(nlohmann_json::nlohmann_json "")
_convoy_installed_as(PkgConfig::CAIRO convoy::cairo)
if(CONVOY_CUDA)
  _convoy_installed_as("${CUDNN_LIBRARY}" convoy::cudnn)
endif()
set_target_properties(convoy_lib PROPERTIES INTERFACE_LINK_LIBRARIES "${_convoy_links}")

# --- The link line for pkg-config ------------------------------------------
# Every library convoy_lib's users must link, walked through the imported
# targets (their locations and their own link interfaces), in link order.
# A library in a folder the compiler searches anyway becomes -lNAME; one
# elsewhere adds -L and, when shared, -Wl,-rpath so the program starts
# without LD_LIBRARY_PATH; a static archive is named exactly (-l:libNAME.a).
function(_convoy_imported_location target out)
  get_target_property(_configs ${target} IMPORTED_CONFIGURATIONS)
  set(_props IMPORTED_LOCATION_RELEASE)
  foreach(_config IN LISTS _configs)
    string(TOUPPER "${_config}" _config)
    list(APPEND _props IMPORTED_LOCATION_${_config})
  endforeach()
  foreach(_prop IN LISTS _props ITEMS IMPORTED_LOCATION)
    get_target_property(_loc ${target} ${_prop})
    if(_loc)
      set(${out} "${_loc}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

function(_convoy_walk_links items out)
  set(_acc ${${out}})
  foreach(_item IN LISTS items)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" _item "${_item}")
    if(TARGET ${_item})
      get_target_property(_type ${_item} TYPE)
      if(NOT _type STREQUAL "INTERFACE_LIBRARY")
        _convoy_imported_location(${_item} _loc)
        if(_loc)
          list(APPEND _acc "${_loc}")
        endif()
      endif()
      get_target_property(_deps ${_item} INTERFACE_LINK_LIBRARIES)
      if(_deps)
        _convoy_walk_links("${_deps}" _acc)
      endif()
    elseif(_item MATCHES "\\$<")
      message(FATAL_ERROR "convoy.pc: cannot turn the link item '${_item}' into a flag")
    else()
      list(APPEND _acc "${_item}")
    endif()
  endforeach()
  set(${out} ${_acc} PARENT_SCOPE)
endfunction()

get_target_property(_convoy_build_links convoy_lib LINK_LIBRARIES)  # the library's own (private + public)
set(_convoy_dep_items)
_convoy_walk_links("${_convoy_build_links}" _convoy_dep_items)
# Keep each library's last appearance: a dependency after what needs it.
list(REVERSE _convoy_dep_items)
list(REMOVE_DUPLICATES _convoy_dep_items)
list(REVERSE _convoy_dep_items)

set(_convoy_pc_dirs)
set(_convoy_pc_libs)
foreach(_item IN LISTS _convoy_dep_items)
  if(_item MATCHES "^-")
    list(APPEND _convoy_pc_libs "${_item}")
  elseif(IS_ABSOLUTE "${_item}")
    get_filename_component(_dir "${_item}" DIRECTORY)
    get_filename_component(_file "${_item}" NAME)
    if(NOT _dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
      list(APPEND _convoy_pc_dirs "-L${_dir}")
      if(NOT _file MATCHES "\\.a$")
        list(APPEND _convoy_pc_dirs "-Wl,-rpath,${_dir}")
      endif()
    endif()
    set(_name "")
    if(_file MATCHES "^lib(.+)\\.so(\\.[0-9.]+)?$")
      set(_name "${CMAKE_MATCH_1}")
    endif()
    if(_name AND EXISTS "${_dir}/lib${_name}.so")
      list(APPEND _convoy_pc_libs "-l${_name}")
    else()  # a static archive, or a versioned libNAME.so.N without its -dev link
      list(APPEND _convoy_pc_libs "-l:${_file}")
    endif()
  else()
    list(APPEND _convoy_pc_libs "-l${_item}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _convoy_pc_dirs)
list(JOIN _convoy_pc_dirs " " _dirs)
list(JOIN _convoy_pc_libs " " _libs)
string(STRIP "-L\${libdir} -lconvoy ${_dirs} ${_libs}" CONVOY_PC_LIBS)
string(REPLACE "  " " " CONVOY_PC_LIBS "${CONVOY_PC_LIBS}")

# pkg-config finds the prefix from where the .pc file lies, so it is right
# for whatever `cmake --install --prefix` chose.
set(_convoy_pkgconfig_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(CONVOY_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(CONVOY_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _up "/root/${_convoy_pkgconfig_dir}" "/root")
  string(REGEX REPLACE "/$" "" _up "${_up}")
  set(CONVOY_PC_PREFIX "\${pcfiledir}/${_up}")
  set(CONVOY_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(CONVOY_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(CONVOY_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/convoy.pc.in ${PROJECT_BINARY_DIR}/install/convoy.pc @ONLY)

# --- The CMake package ---------------------------------------------------------
# What the config file must find again: these switches decide which parts
# were built in (MPI and CUDA are optional).
set(CONVOY_PACKAGE_CUDA ${CONVOY_CUDA})
if(MPI_CXX_FOUND)
  set(CONVOY_PACKAGE_MPI ON)
else()
  set(CONVOY_PACKAGE_MPI OFF)
endif()
if(CONVOY_CUDA)
  get_filename_component(CONVOY_PACKAGE_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
  get_filename_component(CONVOY_PACKAGE_CUDNN_DIR "${CUDNN_LIBRARY}" DIRECTORY)
  get_filename_component(CONVOY_PACKAGE_CUDNN_NAME "${CUDNN_LIBRARY}" NAME)
endif()
set(_convoy_cmake_dir "${CMAKE_INSTALL_LIBDIR}/cmake/convoy")
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/convoyConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/install/convoyConfig.cmake
                              INSTALL_DESTINATION ${_convoy_cmake_dir})
# 0.x: a new minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/convoyConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)

install(TARGETS convoy_lib EXPORT convoyTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS convoy RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/convoy DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(EXPORT convoyTargets NAMESPACE convoy:: DESTINATION ${_convoy_cmake_dir})
install(FILES ${PROJECT_BINARY_DIR}/install/convoyConfig.cmake
              ${PROJECT_BINARY_DIR}/install/convoyConfigVersion.cmake
        DESTINATION ${_convoy_cmake_dir})
install(FILES ${PROJECT_BINARY_DIR}/install/convoy.pc DESTINATION ${_convoy_pkgconfig_dir})
