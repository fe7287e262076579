// Main of the emulator's own tests (the emulated build only), with the strict warnings of
// support/strict_session.h.
#define CATCH_CONFIG_RUNNER
#include "support/strict_session.h"

int main(int argc, char** argv) { return ember::test::run_strict_session(argc, argv); }
