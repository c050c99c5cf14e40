# Kernels for the machine they run on, in one portable binary.
#
# The library is built for the x86-64 baseline, so the binary runs on any
# x86-64. Sources named in convoy_isa_units() are compiled once per
# instruction set, each copy joined into one object whose only global
# definitions are its entry points (tools/isa_localize.py says why); at run
# time the library picks one copy by the CPU's features (convoy/core/cpu_info.h:
# kernel_set()). Entry point NAME_<set> per set; a source tells which set it is
# compiled for by CONVOY_ISA_SUFFIX (core/isa_entry.h).
#
#   convoy_isa_units(TARGET convoy_lib ENTRY convoy_cpu_backend SOURCES a.cpp b.cpp LIBRARIES DNNL::dnnl ...)
set(CONVOY_ISA_SETS base avx2 avx512)
set(CONVOY_ISA_FLAGS_base "")
set(CONVOY_ISA_FLAGS_avx2 "-march=x86-64-v3")    # AVX2, FMA, BMI1/2, F16C (Haswell, Zen and later)
set(CONVOY_ISA_FLAGS_avx512 "-march=x86-64-v4")  # + AVX-512 F/BW/CD/DQ/VL (Skylake-SP, Zen 4 and later)

find_package(Python3 REQUIRED COMPONENTS Interpreter)

function(convoy_isa_units)
  cmake_parse_arguments(U "" "TARGET;ENTRY" "SOURCES;LIBRARIES" ${ARGN})
  foreach(isa IN LISTS CONVOY_ISA_SETS)
    set(objects ${U_ENTRY}_${isa}_objects)
    add_library(${objects} OBJECT ${U_SOURCES})
    target_include_directories(${objects} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src
                                                  ${CMAKE_BINARY_DIR}/generated)
    target_link_libraries(${objects} PRIVATE ${U_LIBRARIES})
    target_compile_definitions(${objects} PRIVATE CONVOY_ISA_SUFFIX=${isa})
    # Vector-typed helpers (winograd_conv.cpp's load/store) change ABI with the
    # instruction set; each copy calls only its own, so the note is noise.
    target_compile_options(${objects} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-psabi>)
    if(CONVOY_ISA_FLAGS_${isa})
      target_compile_options(${objects} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${CONVOY_ISA_FLAGS_${isa}}>)
    endif()
    set(joined ${CMAKE_BINARY_DIR}/isa/${U_ENTRY}_${isa}.o)
    add_custom_command(
      OUTPUT ${joined}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/isa
      COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/isa_localize.py --isa ${isa}
              --entry ${U_ENTRY}_${isa} --ld ${CMAKE_LINKER} --objcopy ${CMAKE_OBJCOPY}
              --out ${joined} $<TARGET_OBJECTS:${objects}>
      DEPENDS ${objects} $<TARGET_OBJECTS:${objects}> ${PROJECT_SOURCE_DIR}/tools/isa_localize.py
      COMMAND_EXPAND_LISTS
      COMMENT "Joining the ${isa} kernels of ${U_ENTRY}")
    set_source_files_properties(${joined} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
    target_sources(${U_TARGET} PRIVATE ${joined})
  endforeach()
endfunction()
