# What `cmake --install` puts under the prefix (and what scripts/package packs): the binaries, the
# Python heartbeat module, the C++ heartbeat header, man pages made from --help (help2man), the
# Slurm job script examples, a systemd unit for cohortd and the README, in the standard layout.
# cohort finds share/cohort/python relative to its own bin/ (common/install_layout), so the
# build tree gets the module at the same place.
include(GNUInstallDirs)

configure_file(${CMAKE_SOURCE_DIR}/python/cohort_heartbeat.py
               ${CMAKE_BINARY_DIR}/share/cohort/python/cohort_heartbeat.py COPYONLY)

install(TARGETS cohort cohortd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/python/cohort_heartbeat.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/cohort/python)
install(FILES ${CMAKE_SOURCE_DIR}/include/cohort/heartbeat.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cohort)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/scripts/slurm/
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/slurm FILES_MATCHING PATTERN "*.sbatch")
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${CMAKE_SOURCE_DIR}/packaging/cohortd.service DESTINATION lib/systemd/system)

find_program(HELP2MAN help2man)
if(HELP2MAN)
  set(man_dir ${CMAKE_BINARY_DIR}/share/man/man1)
  set(cohort_name "launcher for distributed PyTorch and LibTorch training, a drop-in for torchrun")
  set(cohortd_name "the rendezvous daemon of cohort")
  foreach(program cohort cohortd)
    add_custom_command(
      OUTPUT ${man_dir}/${program}.1
      COMMAND ${CMAKE_COMMAND} -E make_directory ${man_dir}
      COMMAND ${HELP2MAN} --no-info --version-string=${PROJECT_VERSION}
              "--name=${${program}_name}" --output=${man_dir}/${program}.1 $<TARGET_FILE:${program}>
      DEPENDS ${program}
      COMMENT "man page of ${program} from its --help")
    list(APPEND man_pages ${man_dir}/${program}.1)
  endforeach()
  add_custom_target(man_pages ALL DEPENDS ${man_pages})
  install(FILES ${man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: no man pages (scripts/setup installs it)")
endif()
