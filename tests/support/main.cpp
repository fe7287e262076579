// Catch2's main for the CPU tests, with the strict warnings of support/strict_session.h.
#define CATCH_CONFIG_RUNNER
#include "support/strict_session.h"

int main(int argc, char** argv) { return ember::test::run_strict_session(argc, argv); }
