// The Catch2 session of every ember test executable: an empty test case and an unmatched test spec fail.
#pragma once

#include <catch2/catch.hpp>

namespace ember::test {

// Catch2 2.13 takes a single --warn on its command line, so both warnings are set here instead, before the
// command line is read (a --warn given there is added to them). NoAssertions: a test case or leaf section
// that checked nothing proves nothing. NoTests: a test spec that matches no test case, such as a CTest
// entry mangled from a test name, ran nothing and must not pass.
inline int run_strict_session(int argc, char** argv) {
  Catch::Session session;
  session.configData().warnings =
      static_cast<Catch::WarnAbout::What>(Catch::WarnAbout::NoAssertions | Catch::WarnAbout::NoTests);
  const int bad_command_line = session.applyCommandLine(argc, argv);
  if (bad_command_line != 0) return bad_command_line;
  return session.run();
}

}  // namespace ember::test
