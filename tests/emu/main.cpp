// Main of the emulator's own tests (the emulated build only).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
