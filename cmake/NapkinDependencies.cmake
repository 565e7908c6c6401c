# The third-party libraries napkin's layers link (Debian 12 packages, tools/install-deps.sh).
# Included by the top-level CMakeLists.txt and by the fuzz build (tests/fuzz/CMakeLists.txt).
find_package(Boost 1.74 REQUIRED)                      # Boost.Graph is header-only
find_package(PkgConfig REQUIRED)
pkg_check_modules(GVC REQUIRED IMPORTED_TARGET libgvc libcgraph)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
