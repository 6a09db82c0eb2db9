// The tessera target's only source when TESSERA_LIBRARY names a prebuilt libtessera.a (CMakeLists.txt): an empty
// archive, so that the target keeps its usage requirements while the prebuilt archive holds the code.
